package main

import "github.com/modelcontextprotocol/go-sdk/mcp"

// registerCore registers the fixtures of the core (non-tasks) scenarios.
func registerCore(s *mcp.Server) {}
