package mcpserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowOut is stdout that takes a millisecond a write, so that messages
// queue behind one on its way; it fails from write number failAt on.
type slowOut struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	failAt int // 0: never
}

var errOut = errors.New("stdout: broken pipe")

func (o *slowOut) Write(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writes++
	if o.failAt > 0 && o.writes >= o.failAt {
		return 0, errOut
	}
	return o.buf.Write(p)
}

func newFrameWriter(out io.Writer) *frameWriter {
	return &frameWriter{w: out, wait: closeWait}
}

// Messages written at once by 8 writers reach stdout whole, each once,
// each writer's in its order, in fewer writes than messages; Close
// returns once the last is out.
func TestFrameWriterBatchesInOrder(t *testing.T) {
	out := &slowOut{}
	f := newFrameWriter(out)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for n := range each {
				msg := fmt.Sprintf(`{"writer":%d,"n":%d,"pad":%q}`+"\n", g, n, strings.Repeat("x", n))
				_, err := f.Write([]byte(msg))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.NoError(t, f.Close())

	lines := strings.Split(strings.TrimSuffix(out.buf.String(), "\n"), "\n")
	require.Len(t, lines, writers*each)
	next := make([]int, writers)
	for _, l := range lines {
		var g, n int
		_, err := fmt.Sscanf(l, `{"writer":%d,"n":%d,`, &g, &n)
		require.NoError(t, err, "a whole message: %q", l)
		require.Equal(t, fmt.Sprintf(`{"writer":%d,"n":%d,"pad":%q}`, g, n, strings.Repeat("x", n)), l)
		require.Equal(t, next[g], n, "writer %d's messages in order", g)
		next[g]++
	}
	assert.Less(t, out.writes, writers*each, "queued messages share a write")
}

// A write error is returned to the writer whose write failed and to every
// later one; nothing more is written.
func TestFrameWriterKeepsTheFirstError(t *testing.T) {
	out := &slowOut{failAt: 2}
	f := newFrameWriter(out)
	_, err := f.Write([]byte("one\n"))
	require.NoError(t, err)
	_, err = f.Write([]byte("two\n"))
	require.ErrorIs(t, err, errOut)
	n, err := f.Write([]byte("three\n"))
	assert.ErrorIs(t, err, errOut)
	assert.Zero(t, n)
	require.NoError(t, f.Close())
	assert.Equal(t, "one\n", out.buf.String())
	assert.Equal(t, 2, out.writes, "no write after the failure")
}

// stuckOut is stdout nobody reads: a write blocks until release closes.
type stuckOut struct{ release chan struct{} }

func (o stuckOut) Write(p []byte) (int, error) {
	<-o.release
	return len(p), nil
}

// Close waits for the queue only so long: a client that stops reading
// does not keep the server from ending.
func TestFrameWriterCloseDoesNotWaitForever(t *testing.T) {
	out := stuckOut{release: make(chan struct{})}
	defer close(out.release)
	f := newFrameWriter(out)
	f.wait = 50 * time.Millisecond
	go func() { _, _ = f.Write([]byte("stuck\n")) }()
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.written != nil
	}, 5*time.Second, time.Millisecond)
	_, err := f.Write([]byte("queued\n"))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, f.Close())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "it waited for the write on its way")
}

// Close returns once the Write on its way has written what was queued
// behind it.
func TestFrameWriterCloseWaitsForTheQueue(t *testing.T) {
	out := &slowOut{}
	f := newFrameWriter(out)
	first := make(chan struct{})
	go func() {
		close(first)
		_, _ = f.Write([]byte("first\n"))
	}()
	<-first
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.written != nil
	}, 5*time.Second, 10*time.Microsecond)
	_, err := f.Write([]byte("queued\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out.mu.Lock()
	defer out.mu.Unlock()
	assert.Equal(t, "first\nqueued\n", out.buf.String())
}
