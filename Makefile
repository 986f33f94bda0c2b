# darkroom: make run | test | generate | lint | bench | soak | docker | image | image-test | fleet-test | conformance | bundle | release
SHELL := /bin/bash
GO ?= go
BIN := $(HOME)/.cache/darkroom/bin
# The release's version: the vX.Y.Z tag at HEAD without its v, else 0.0.0-dev.gSHA
# (cmd/darkroom-release says which when VERSION is empty).
VERSION ?=
DIST ?= dist
SQLC := $(GO) tool -modfile=$(CURDIR)/tools/go.mod sqlc

.PHONY: run test unit lint generate check-generated bench soak docker image image-test fleet-test conformance tools bundle release

run: ## serve on the embedded default: SQLite, local folder, local provider
	$(GO) run ./cmd/darkroom serve

test: lint check-generated ## the whole suite, as CI runs it
	scripts/test.sh

unit: ## go tests only, without the external servers
	$(GO) test -race -count=1 ./...

tools:
	scripts/tools.sh staticcheck

lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

generate: ## regenerate sqlc code from sqlfiles/ and the MCP Apps view (ui/viewer.html) from web/viewer
	cd sqlfiles && $(SQLC) generate
	scripts/viewer.sh build

check-generated: ## fail when generated code is stale
	cd sqlfiles && $(SQLC) diff
	scripts/viewer.sh check

bench: ## performance figures (prints ratios measured in one run; starts the test PostgreSQL)
	scripts/bench.sh

soak: ## TestSoak for DARKROOM_SOAK (default 20m): three replicas under load and one fault a minute; prints the report's folder (not in CI)
	scripts/soak.sh

docker: ## lint the Dockerfile and build the same static binary it builds
	scripts/dockerlint.sh

image: ## build the real Dockerfile with a container engine (Docker, or Podman with stand-in bases) as darkroom:latest, the name README runs
	DARKROOM_IMAGE=$${DARKROOM_IMAGE:-darkroom:latest} scripts/image.sh build

image-test: ## build the image, then check it running (deploy/imagetest)
	scripts/image.sh test

fleet-test: ## bring deploy/compose.yaml up (three replicas, HAProxy, PostgreSQL, S3) and run the fleet checks through HAProxy
	scripts/fleet.sh test

conformance: ## the official MCP conformance suite against the fixture server
	scripts/conformance.sh

bundle: ## the MCP Bundle for Claude Desktop: $(DIST)/darkroom-VERSION.mcpb with every platform's static binary
	$(GO) run ./cmd/darkroom-release bundle -out $(DIST) -version "$(VERSION)"

release: ## every platform's binary, the bundle, SHA256SUMS, server.json and the Docker catalog's files in $(DIST) (publishes nothing)
	$(GO) run ./cmd/darkroom-release release -out $(DIST) -version "$(VERSION)"
