package blob

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill the server if the test binary dies
// without running its cleanups (a panic or a -timeout).
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
