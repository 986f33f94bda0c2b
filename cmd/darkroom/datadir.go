package main

import (
	"os"
	"path/filepath"
	"runtime"
)

// userDataDir is stdio's default data directory: the platform's folder
// for an application's own data, so that a host that starts darkroom
// from any working directory (a desktop app's is often / or the app's
// bundle) finds the same database and files every time. It is
// $XDG_DATA_HOME/darkroom or ~/.local/share/darkroom on Linux and the
// BSDs, ~/Library/Application Support/darkroom on macOS and
// %LOCALAPPDATA%\darkroom on Windows; "./darkroom-data" when none can be
// named (no home directory).
func userDataDir() string {
	return userDataDirFor(runtime.GOOS, os.Getenv, os.UserHomeDir)
}

func userDataDirFor(goos string, getenv func(string) string, home func() (string, error)) string {
	const fallback = "./darkroom-data"
	switch goos {
	case "windows":
		if d := getenv("LOCALAPPDATA"); d != "" {
			return filepath.Join(d, "darkroom")
		}
		return fallback
	case "darwin", "ios":
		h, err := home()
		if err != nil || h == "" {
			return fallback
		}
		return filepath.Join(h, "Library", "Application Support", "darkroom")
	default:
		if d := getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
			return filepath.Join(d, "darkroom")
		}
		h, err := home()
		if err != nil || h == "" {
			return fallback
		}
		return filepath.Join(h, ".local", "share", "darkroom")
	}
}
