package main

import (
	"fmt"
	"log/slog"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/comfyui"
)

// comfyProvider builds the ComfyUI provider (its adapters row is on
// when DARKROOM_COMFYUI_URL is set): each workflow of DARKROOM_COMFYUI_WORKFLOWS a
// model, or the shipped examples when no folder is set.
func comfyProvider(cfg *config, log *slog.Logger) (provider.Provider, error) {
	var ws []*comfyui.Workflow
	var err error
	if cfg.ComfyWorkflows != "" {
		ws, err = comfyui.LoadWorkflows(cfg.ComfyWorkflows)
	} else {
		ws, err = comfyui.Examples()
	}
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, fmt.Errorf("comfyui: no workflow in %s (API-format .json files)", cfg.ComfyWorkflows)
	}
	p, err := comfyui.New(comfyui.Config{URLs: cfg.ComfyURLs, Header: cfg.ComfyHeader, Workflows: ws, GiveUp: cfg.ComfyGiveUp, Logger: log})
	if err != nil {
		return nil, err
	}
	return p, nil
}
