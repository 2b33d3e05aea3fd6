// Package childproc runs the processes the test harnesses drive (the built
// collector, the real agent server, the stubs of the benchmark): start,
// wait in the background, stop with SIGTERM and SIGKILL after a grace.
// It also hands out loopback addresses for such a child to listen on.
package childproc

import (
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// Process is one started child.
type Process struct {
	cmd     *exec.Cmd
	group   bool
	exited  chan struct{}
	exitErr error
}

// Option is a variation on how the child runs.
type Option func(*Process)

// InGroup runs the child in its own process group: stopping it signals the
// whole group, and what is left of the group after the child exits (a tool
// it started) is killed too.
func InGroup() Option {
	return func(p *Process) {
		p.group = true
		sysProcAttr(p.cmd).Setpgid = true
	}
}

// DieWithParent has the kernel kill the child when this process dies, so
// that an interrupted harness leaves nothing running.
func DieWithParent() Option {
	return func(p *Process) { sysProcAttr(p.cmd).Pdeathsig = syscall.SIGKILL }
}

func sysProcAttr(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	return cmd.SysProcAttr
}

// Start starts cmd, which the caller has prepared (arguments, environment,
// standard streams), and waits for it in the background.
func Start(cmd *exec.Cmd, opts ...Option) (*Process, error) {
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	for _, opt := range opts {
		opt(p)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is why the child exited; read it after Exited is closed.
func (p *Process) ExitErr() error { return p.exitErr }

// Running reports whether the child is still alive.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop asks the child to shut down (SIGTERM), kills it (SIGKILL) if it is
// still running after grace, and waits until it is gone. It reports
// whether the child had to be killed.
func (p *Process) Stop(grace time.Duration) (killed bool) {
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		killed = true
		_ = p.signal(syscall.SIGKILL)
		<-p.exited
	}
	if p.group {
		_ = p.signal(syscall.SIGKILL)
	}
	return killed
}

// Kill kills the child with SIGKILL, as an OOM kill or a node loss would,
// and waits until it is gone.
func (p *Process) Kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s: %w", p.cmd.Path, err)
	}
	<-p.exited
	return nil
}

func (p *Process) signal(sig syscall.Signal) error {
	if p.group {
		return syscall.Kill(-p.cmd.Process.Pid, sig)
	}
	return p.cmd.Process.Signal(sig)
}

// FreeAddr is a loopback address (host:port) nothing listens on right now,
// for a child to listen on.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
