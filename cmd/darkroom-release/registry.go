package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// The repository's server.json is the registry entry of the version
// 0.0.0-dev; a release fills in its version, the image's tag, the
// bundle's download URL and its SHA-256.
const (
	serverJSON  = "server.json"
	templateVer = "0.0.0-dev"
	imageRepo   = "ghcr.io/darkroom-mcp/darkroom"
)

// registryEntry is what a release checks of its server.json.
type registryEntry struct {
	Version  string `json:"version"`
	Packages []struct {
		RegistryType string `json:"registryType"`
		Identifier   string `json:"identifier"`
		Version      string `json:"version"`
		FileSHA256   string `json:"fileSha256"`
	} `json:"packages"`
}

// releaseServerJSON returns the repository's server.json (b) for version,
// whose bundle's SHA-256 is bundleSHA: the template's version replaced
// wherever it stands (the entry's, the image tag, the bundle's URL and
// version) and its placeholder digest by the bundle's, by text so that
// the file keeps its order and layout; then checked field by field.
func releaseServerJSON(b []byte, version, bundleSHA string) ([]byte, error) {
	out := strings.ReplaceAll(string(b), templateVer, version)
	out = strings.Replace(out, `"fileSha256": "`+strings.Repeat("0", 64)+`"`, `"fileSha256": "`+bundleSHA+`"`, 1)
	var e registryEntry
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		return nil, fmt.Errorf("server.json: %w", err)
	}
	var oci, mcpb bool
	for _, p := range e.Packages {
		switch p.RegistryType {
		case "oci":
			oci = p.Identifier == imageRepo+":"+version
		case "mcpb":
			mcpb = p.Identifier == bundleURL(version) && p.Version == version && p.FileSHA256 == bundleSHA
		}
	}
	if e.Version != version || !oci || !mcpb {
		return nil, fmt.Errorf("server.json: the template does not hold %s (and an mcpb fileSha256 of zeros) where a release fills them in", templateVer)
	}
	return []byte(out), nil
}

// bundleURL is where a release's bundle is downloaded from: its GitHub
// release, whose URL contains "mcp" as the registry asks of an MCPB.
func bundleURL(version string) string {
	return repoURL + "/releases/download/v" + version + "/darkroom-" + version + ".mcpb"
}

func readServerJSON(root string) ([]byte, error) { return os.ReadFile(root + "/" + serverJSON) }
