package childproc

import (
	"bufio"
	"io"
	"net"
	"os"
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
		// The child exits on SIGTERM; the process it started ignores it
		// and is killed as what is left of the group.
		{name: "group outlives the child", script: `(trap "" TERM; echo ready; exec sleep 60) & exec sleep 60`, opts: []Option{InGroup()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every process of the script holds stdout: it reads to EOF
			// only once none of them is left.
			stdout, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdout.Close()
			cmd := exec.Command("sh", "-c", tt.script)
			cmd.Stdout = w
			p, err := Start(cmd, tt.opts...)
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			// The shell has set its trap once it says so.
			out := bufio.NewReader(stdout)
			if _, err := out.ReadString('\n'); err != nil {
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
			if err := stdout.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(out); err != nil {
				t.Errorf("a process the child started outlived Stop: %v", err)
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
