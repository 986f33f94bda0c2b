package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestBadDockerfileFails(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"testdata/bad.Dockerfile"}, &out, &errOut); code != 1 {
		t.Fatalf("exit code = %d, want 1\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	for _, rule := range []string{
		"StageNameCasing", "ConsistentInstructionCasing", "MaintainerDeprecated",
		"LegacyKeyValueFormat", "WorkdirRelativePath", "CopyIgnoredFile",
		"ExposeProtoCasing", "JSONArgsRecommended",
	} {
		if !strings.Contains(out.String(), "WARNING: "+rule+" ") {
			t.Errorf("no %s finding in output:\n%s", rule, &out)
		}
	}
	if !strings.Contains(out.String(), "bad.Dockerfile:5\n") {
		t.Errorf("findings do not name the source line:\n%s", &out)
	}
}

func TestGoodDockerfilePasses(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"testdata/good.Dockerfile"}, &out, &errOut); code != 0 {
		t.Fatalf("exit code = %d, want 0\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	if strings.Contains(out.String(), "WARNING") {
		t.Errorf("unexpected findings:\n%s", &out)
	}
}

func TestSyntaxErrorFails(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/Dockerfile"
	writeFile(t, f, "FROM scratch\nFROBNICATE /x\n")
	var out, errOut bytes.Buffer
	if code := run([]string{f}, &out, &errOut); code != 1 {
		t.Fatalf("exit code = %d, want 1\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	if !strings.Contains(out.String(), "ERROR: ") {
		t.Errorf("no ERROR in output:\n%s", &out)
	}
}

func TestMissingFileIsUsageError(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"testdata/does-not-exist"}, &out, &errOut); code != 2 {
		t.Fatalf("exit code = %d, want 2", code)
	}
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
