package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"

	"go.uber.org/zap"
)

// restore reads, before the first poll, this server's index from storage,
// and builds no conversation it does not have to: each batch that may not
// have left is sent again (even for a conversation resharded away: it
// belongs to this replica's session), and a conversation whose session
// ended leaves storage. The others of this shard wait in persisted, as
// ids only, for discovery to list them (wake) or find them gone.
func (w *serverWatch) restore(ctx context.Context) {
	if w.journal == nil {
		return
	}
	index, err := w.journal.load(ctx)
	if err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.logger.Error("cannot read all of this server's conversation index from storage; the conversations it names start fresh", zap.Error(err))
	}
	for _, id := range index.ended {
		w.ended.add(id)
	}
	pending, err := w.journal.pending(ctx, index.live)
	if err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.logger.Error("cannot read the pending batches from storage; those unread are not sent again", zap.Error(err))
	}
	// The objects built to send again are not kept: discovery builds them
	// anew from the state stored with the batch.
	over := make(map[string]bool, len(pending))
	for _, id := range pending {
		over[id] = w.build(ctx, conversationInfo{ID: id}) == nil // ended, or starts fresh
	}
	w.persisted = make(map[string]struct{})
	for _, id := range index.live {
		if !over[id] && w.shard.owns(id) {
			w.persisted[id] = struct{}{}
		}
	}
	w.logger.Info("read the conversation index from storage",
		zap.Int("conversations", len(w.persisted)), zap.Int("batches_resent", len(pending)))
}

// wake builds a conversation from storage when discovery first shows it,
// and returns it, or nil if its session ended or its state cannot be read
// (it then starts fresh).
func (w *serverWatch) wake(ctx context.Context, info conversationInfo) *conversation {
	delete(w.persisted, info.ID)
	c := w.build(ctx, info)
	if c != nil {
		w.convs[info.ID] = c
		w.index.add(c.session)
	}
	return c
}

// build makes the object of a conversation in storage: it sends a pending
// batch again, and removes a conversation whose session ended from
// storage (nil). An unreadable state is logged and counted (nil).
func (w *serverWatch) build(ctx context.Context, info conversationInfo) *conversation {
	s := w.journal.loadConversation(ctx, info.ID)
	if s.err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.logger.Error("cannot read a conversation's state from storage; it starts fresh",
			zap.String("conversation", info.ID), zap.Error(s.err))
		return nil
	}
	c, err := w.open(info, &s.state)
	if err != nil {
		w.logger.Error("cannot restore conversation", zap.String("conversation", info.ID), zap.Error(err))
		return nil
	}
	handedOn := true
	if s.pending != nil {
		w.tel.batchesResent.Add(ctx, 1)
		handedOn = c.session.resend(ctx, *s.pending)
	}
	if s.state.Mapping.Ended {
		w.ended.add(info.ID)
		if handedOn {
			w.forget(ctx, info.ID)
		}
		return nil
	}
	return c
}

// open builds the conversation of info: a new session in this process's
// epoch, or the one restored from storage.
func (w *serverWatch) open(info conversationInfo, restored *durableState) (*conversation, error) {
	state := freshState(w.epoch)
	if _, skip := w.fromEnd[info.ID]; skip {
		state.Cursor.FromEnd = true
		delete(w.fromEnd, info.ID)
	}
	if restored != nil {
		state = *restored
	}
	s, err := newSession(w.sessions, info.ID, w.lineage(info), state)
	if err != nil {
		return nil, err
	}
	return newConversation(w.attaches, info, s), nil
}

// forget removes an ended conversation from storage. Should that fail,
// the next start finds its batch or its state and removes it then.
func (w *serverWatch) forget(ctx context.Context, id string) {
	if w.journal == nil {
		return
	}
	if err := w.journal.forget(ctx, id); err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.rl.Warn("storage:"+id, "could not remove an ended conversation from storage; the next start does",
			zap.String("conversation", id), zap.Error(err))
	}
}
