package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

const (
	// churnBound bounds each wait of the churn benchmark.
	churnBound = 10 * time.Minute
	// settled is how long the storage directory must keep its size to
	// count as settled (compaction checks every second).
	settled = 5 * time.Second
	// deleters is how many conversations are deleted at once.
	deleters = 16
)

// runChurn measures the receiver's storage on file_storage over
// conversation churn. Conversations are created on the stub and deleted
// in waves; after each wave's session.ended have all reached the relay
// and the directory settled, its size is compared with the baseline,
// taken after a first wave (which fills the fixed lists of recently ended
// ids). Then -churn-live conversations are left live, the collector is
// restarted on that storage with the default max_conversations, and the
// time until a conversation created just before has its session.started
// at the relay, and the collector's RSS and Go heap then and a little
// later, are reported.
func runChurn(ctx context.Context, o options) error {
	rs := &receiverStorage{maxConversations: 10000, idleDetach: time.Second, poll: 100 * time.Millisecond}
	o.conversations = 0
	r, _, err := startRig(ctx, o, true, rs)
	if err != nil {
		return err
	}
	defer r.close()
	empty, err := dirSize(r.storageDir)
	if err != nil {
		return err
	}
	fmt.Printf("Churn: %s, storage directory at start %.1f KiB on disk; %d waves of %d conversations created and deleted after a warm-up wave.\n\n",
		o.collector, kib(empty), o.churnWaves, o.churnWave)
	fmt.Println("| wave | KiB with the wave live | KiB after it ended, settled | vs baseline | end to settled s | files after: KiB on disk of length |")
	fmt.Println("|---|---|---|---|---|---|")
	var baseline int64
	for wave := range o.churnWaves + 1 {
		live, after, took, err := r.churnWave(ctx, o.churnWave)
		if err != nil {
			return fmt.Errorf("wave %d: %w", wave, err)
		}
		name := fmt.Sprint(wave)
		if wave == 0 {
			baseline, name = after, "warm-up (baseline)"
		}
		fmt.Printf("| %s | %.1f | %.1f | %+.1f%% | %.1f | %s |\n", name, kib(live), kib(after),
			100*float64(after-baseline)/float64(baseline), took.Seconds(), filesKiB(r.storageDir))
	}
	if o.churnLive == 0 {
		return nil
	}
	return r.restartOnLive(ctx, o, rs, baseline)
}

// churnWave creates n idle conversations, waits for their sessions to
// start, deletes them, waits for their sessions to end and the storage
// directory to settle, and returns its size with the wave live and after.
func (r *rig) churnWave(ctx context.Context, n int) (live, after int64, took time.Duration, err error) {
	ids, err := r.createLive(ctx, n)
	if err != nil {
		return 0, 0, 0, err
	}
	if live, err = dirSize(r.storageDir); err != nil {
		return 0, 0, 0, err
	}
	if err := r.deleteConversations(ctx, ids); err != nil {
		return 0, 0, 0, err
	}
	if err := r.awaitMarked(ctx, "session.ended", ids); err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	after, err = settle(ctx, r.storageDir)
	return live, after, time.Since(start), err
}

// createLive creates n idle conversations on the stub and waits until
// each has its session.started at the relay.
func (r *rig) createLive(ctx context.Context, n int) ([]string, error) {
	ids, err := r.create(ctx, n, "idle")
	if err != nil {
		return nil, err
	}
	return ids, r.awaitMarked(ctx, "session.started", ids)
}

// restartOnLive leaves -churn-live conversations live, stops the
// collector, creates one more conversation and starts the collector again
// on the same storage, and reports the start.
func (r *rig) restartOnLive(ctx context.Context, o options, rs *receiverStorage, baseline int64) error {
	for created := 0; created < o.churnLive; created += o.churnWave {
		if _, err := r.createLive(ctx, min(o.churnWave, o.churnLive-created)); err != nil {
			return err
		}
	}
	r.ours.stop(time.Minute)
	stopped, err := dirSize(r.storageDir)
	if err != nil {
		return err
	}
	fresh, err := r.create(ctx, 1, "running")
	if err != nil {
		return err
	}
	start := time.Now()
	if err := r.startOurs(ctx, o, "ours-restart", &receiverStorage{maxConversations: 1000, idleDetach: rs.idleDetach, poll: time.Second}); err != nil {
		return err
	}
	if err := r.awaitMarked(ctx, "session.started", fresh); err != nil {
		return err
	}
	ready := time.Since(start)
	fmt.Printf("\nStart with %d live conversations in storage (%.1f KiB at stop, %.0f bytes per conversation over the baseline), max_conversations 1000:\n\n",
		o.churnLive, kib(stopped), float64(stopped-baseline)/float64(o.churnLive))
	fmt.Println("| after | RSS MB | Go heap (live, after GC) MB | storage KiB |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| new session at the relay: %.1f s |", ready.Seconds())
	if err := r.printFootprint(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
	}
	fmt.Printf("| %.0f s |", time.Since(start).Seconds())
	return r.printFootprint(ctx)
}

// printFootprint ends a table row with our collector's RSS, Go heap and
// storage size.
func (r *rig) printFootprint(ctx context.Context) error {
	rss, err := rssBytes(r.ours.Pid())
	if err != nil {
		return err
	}
	heap, _, err := heapStats(ctx, r.pprofAddr)
	if err != nil {
		return err
	}
	size, err := dirSize(r.storageDir)
	if err != nil {
		return err
	}
	fmt.Printf(" %.1f | %.1f | %.1f |\n", mb(rss), mb(heap), kib(size))
	return nil
}

// deleteConversations deletes ids on the stub over its REST API.
func (r *rig) deleteConversations(ctx context.Context, ids []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(deleters)
	for _, id := range ids {
		g.Go(func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.stubURL+"/api/conversations/"+id, nil)
			if err != nil {
				return err
			}
			req.Header.Set("X-Session-API-Key", stubKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("delete %s: %w", id, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("delete %s: HTTP %d", id, resp.StatusCode)
			}
			return nil
		})
	}
	return g.Wait()
}

// awaitMarked waits until every one of ids has an event of type typ at
// the relay.
func (r *rig) awaitMarked(ctx context.Context, typ string, ids []string) error {
	err := awaitCount(ctx, func() (int, error) {
		select {
		case <-r.ours.Exited():
			return 0, fmt.Errorf("our collector exited (see %s)", r.ours.stderr.Name())
		default:
		}
		return r.watch.markedCount(typ, ids), r.watch.failure()
	}, len(ids), churnBound)
	if err != nil {
		return fmt.Errorf("%s: %w", typ, err)
	}
	return nil
}

// settle waits until the size of dir has not changed for settled, and
// returns it.
func settle(ctx context.Context, dir string) (int64, error) {
	deadline := time.Now().Add(churnBound)
	last, since := int64(-1), time.Now()
	for {
		size, err := dirSize(dir)
		if err != nil {
			return 0, err
		}
		if size != last {
			last, since = size, time.Now()
		}
		if time.Since(since) >= settled || time.Now().After(deadline) {
			return size, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// dirSize is the disk space the regular files under dir take, as du
// counts it: bbolt grows its file ahead of its data, as a sparse file.
func dirSize(dir string) (int64, error) {
	files, err := fileSizes(dir)
	var total int64
	for _, size := range files {
		total += size.disk
	}
	return total, err
}

// fileSize is a file's length and the disk space it takes.
type fileSize struct{ length, disk int64 }

// fileSizes is the size of each regular file under dir, by name.
func fileSizes(dir string) (map[string]fileSize, error) {
	files := map[string]fileSize{}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // a compaction's file, renamed meanwhile
		case err != nil:
			return err
		}
		size := fileSize{length: info.Size(), disk: info.Size()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			size.disk = st.Blocks * 512
		}
		files[d.Name()] = size
		return nil
	})
	return files, err
}

// filesKiB lists the files under dir with their disk space and length
// in KiB.
func filesKiB(dir string) string {
	files, _ := fileSizes(dir)
	var out []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		out = append(out, fmt.Sprintf("%s %.0f of %.0f", name, kib(files[name].disk), kib(files[name].length)))
	}
	return strings.Join(out, ", ")
}

func kib(b int64) float64 { return float64(b) / 1024 }
