//go:build unix

package lab

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd's context kill its whole process group: nbconvert,
// the kernel and the cell's program.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
