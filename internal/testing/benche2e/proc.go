package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux the collector ships for).
const clockTicks = 100

// proc is one child process: a collector, the stub, the relay or the
// floor. Its stdin and stdout carry the line protocols of ohstub and the
// floor; stderr is kept in a file so that a failure can be read.
type proc struct {
	*childproc.Process
	name   string
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line
	stderr *os.File
	mu     sync.Mutex // one command at a time
}

func startProc(name, dir string, args []string, env ...string) (*proc, error) {
	stderr, err := os.Create(fmt.Sprintf("%s/%s.stderr", dir, name))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	child, err := childproc.Start(cmd, childproc.DieWithParent())
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{Process: child, name: name, stdin: stdin, lines: make(chan string, 64), stderr: stderr}
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(nil, 64<<20)
		for scanner.Scan() {
			p.lines <- scanner.Text()
		}
		close(p.lines)
	}()
	return p, nil
}

// readLine waits for the next stdout line.
func (p *proc) readLine(ctx context.Context) (string, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("%s exited (see %s)", p.name, p.stderr.Name())
		}
		return line, nil
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for %s: %w", p.name, ctx.Err())
	}
}

// ask sends one command line and returns the answer line; an "error …"
// answer is an error.
func (p *proc) ask(ctx context.Context, command string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.stdin, command); err != nil {
		return "", fmt.Errorf("%s %q: %w", p.name, command, err)
	}
	line, err := p.readLine(ctx)
	if err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		return "", fmt.Errorf("%s %q: %s", p.name, command, rest)
	}
	return line, nil
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	_ = p.stdin.Close()
	p.Stop(grace)
	_ = p.stderr.Close()
}

// cpuSeconds is the user and system CPU the process has used so far.
func cpuSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it are plain.
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	fields := strings.Fields(s[end+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (utime + stime) / clockTicks, nil
}

// rssBytes is the process's resident set size.
func rssBytes(pid int) (uint64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// cpuMeter measures the CPU a set of processes spends between start and
// stop.
type cpuMeter struct {
	procs  map[string]*proc
	before map[string]float64
}

func newCPUMeter(procs map[string]*proc) *cpuMeter {
	m := &cpuMeter{procs: procs, before: map[string]float64{}}
	for name, p := range procs {
		m.before[name], _ = cpuSeconds(p.Pid())
	}
	return m
}

// spent returns the CPU seconds each process used since newCPUMeter.
func (m *cpuMeter) spent() map[string]float64 {
	out := map[string]float64{}
	for name, p := range m.procs {
		now, err := cpuSeconds(p.Pid())
		if err == nil {
			out[name] = now - m.before[name]
		}
	}
	return out
}
