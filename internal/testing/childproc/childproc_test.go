package childproc

import (
	"bufio"
	"net"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStop(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		opts       []Option
		wantKilled bool
	}{
		{name: "exits on SIGTERM", script: "echo ready; exec sleep 60"},
		{name: "ignores SIGTERM", script: `trap "" TERM; echo ready; while :; do sleep 0.1; done`, wantKilled: true},
		{name: "group ignores SIGTERM", script: `trap "" TERM; echo ready; while :; do sleep 0.1; done`, opts: []Option{InGroup()}, wantKilled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tt.script)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			p, err := Start(cmd, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			// The shell has set its trap once it says so.
			if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			if !p.Running() {
				t.Fatal("not running after Start")
			}
			if killed := p.Stop(200 * time.Millisecond); killed != tt.wantKilled {
				t.Errorf("Stop killed = %v, want %v", killed, tt.wantKilled)
			}
			if p.Running() {
				t.Error("still running after Stop")
			}
		})
	}
}

func TestKill(t *testing.T) {
	p, err := Start(exec.Command("sleep", "60"), DieWithParent())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.ExitErr() == nil {
		t.Error("a killed child reports no exit error")
	}
	if err := p.Kill(); err == nil {
		t.Error("killing an exited child is no error")
	}
}

func TestFreeAddr(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("cannot listen on %s: %v", addr, err)
	}
	ln.Close()
}
