package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// Defaults of Options.
const (
	DefaultResyncPeriod = 5 * time.Minute
	DefaultWorkers      = 4
	// MaxRetryDelay caps the per-object backoff after failed writes (README
	// "Kubernetes output", Errors: "backoff up to 30 s").
	MaxRetryDelay  = 30 * time.Second
	baseRetryDelay = 200 * time.Millisecond
)

// Source is the desired state: the aggregate store's ServiceEntries and
// WorkloadEntries (serviceentry.Store satisfies it). Handlers run on the
// store's one worker queue and must be quick.
type Source interface {
	Get(kind model.Kind, name, namespace string) *model.Config
	List(kind model.Kind, namespace string) []*model.Config
	RegisterEventHandler(kind model.Kind, h serviceentry.Handler)
}

// Options configure a Writer.
type Options struct {
	// Namespace is output.namespace: where every object is written, and the
	// only namespace listed and garbage-collected.
	Namespace string
	// Registries are the configured registry names. An object is ours only
	// when it carries app.kubernetes.io/managed-by=meshbridge and a
	// meshbridge.io/registry label naming one of them.
	Registries []string
	// Client is the istio.io/client-go clientset (networking.istio.io/v1).
	Client versioned.Interface
	// RegistrySynced reports whether a registry delivered its first
	// listing. Objects of a registry that has not are never deleted: the
	// store not holding them means "not known yet" (docs/design.md §8). nil
	// means every registry has synced.
	RegistrySynced func(registry string) bool
	// ResyncPeriod is how often the leader lists the apiserver's objects,
	// garbage-collects and corrects drift (an edited or deleted object of
	// ours). Default DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Workers is the number of concurrent writes. Default DefaultWorkers.
	Workers int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Writer writes the aggregate store's ServiceEntries and WorkloadEntries to
// Kubernetes as networking.istio.io/v1 objects (README "Kubernetes output"):
//
//   - A store handler queues the key of every changed object on a
//     rate-limited client-go workqueue; a key is queued at most once, and a
//     worker reads the latest desired state from the store when it gets it.
//   - Writes are server-side applies with field manager "meshbridge", sent
//     only when the object's meshbridge.io/content-hash differs from the copy
//     the apiserver holds; so an unchanged mesh, also after a restart, costs
//     zero writes.
//   - Garbage collection, at the start of leadership and every ResyncPeriod:
//     objects carrying our ownership labels that the store no longer holds
//     are deleted (with a UID precondition). An object without our labels is
//     never written nor deleted, even under one of our names
//     (meshbridge_kube_conflicts_total).
//   - Only while leading (see Lead) are writes started; the handlers and the
//     queue cost nothing otherwise.
//   - Failed writes are retried with per-object exponential backoff up to
//     MaxRetryDelay; a 4xx the apiserver will answer again (invalid, bad
//     request, too large) is logged with the object and not retried until
//     the object changes or the next resync. Objects whose request would
//     exceed translate.MaxObjectBytes are never sent.
type Writer struct {
	opts  Options
	log   *slog.Logger
	src   Source
	kinds map[model.Kind]kindClient
	ours  string // the label selector of our objects
	queue workqueue.TypedRateLimitingInterface[model.ConfigKey]

	leaders    atomic.Int32 // active Lead calls
	answered   atomic.Int64 // requests the apiserver answered (any status)
	lastResync atomic.Pointer[time.Time]

	mu sync.Mutex
	// live is what the apiserver holds under our names: from the last
	// resync's list, then from every lookup and write response since. A
	// deleted object stays as a tombstone (gone) until the next resync.
	// Valid while leading.
	live map[model.ConfigKey]liveState
	// rejected maps a key to the content the apiserver refused with a
	// permanent error; that content is not sent again.
	rejected map[model.ConfigKey]rejection
	// seq orders what workers learn against resync lists: every entry of
	// live and rejected records the seq of when it was learnt.
	seq uint64
	// outstanding are the keys queued or waiting out a retry's backoff;
	// inflight counts the keys being synced. Together they are the queue
	// depth (the workqueue's Len misses keys in backoff).
	outstanding map[model.ConfigKey]struct{}
	inflight    int
	// backingOff are the outstanding keys waiting out a retry's backoff.
	backingOff map[model.ConfigKey]struct{}
}

// liveState is the apiserver's copy of an object under one of our names.
type liveState struct {
	foreign  bool // the object lacks our ownership labels
	gone     bool // deleted by this writer
	hash     string
	uid      types.UID
	registry string
	seq      uint64
}

// rejection is content of an object the apiserver refused.
type rejection struct {
	hash string
	seq  uint64
}

// NewWriter validates opts and registers the writer's handlers on src.
func NewWriter(src Source, opts Options) (*Writer, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("kube: no client")
	case opts.Namespace == "":
		return nil, errors.New("kube: no namespace")
	case len(opts.Registries) == 0:
		return nil, errors.New("kube: no registries")
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	regs := slices.Sorted(slices.Values(opts.Registries))
	w := &Writer{
		opts:  opts,
		log:   opts.Logger.With("component", "kube"),
		src:   src,
		kinds: kindClients(opts.Client),
		ours: fmt.Sprintf("%s=%s,%s in (%s)", model.LabelManagedBy, model.ManagedByValue,
			model.LabelRegistry, strings.Join(regs, ",")),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[model.ConfigKey](baseRetryDelay, MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[model.ConfigKey]{Name: "meshbridge-kube"}),
		live:        map[model.ConfigKey]liveState{},
		rejected:    map[model.ConfigKey]rejection{},
		outstanding: map[model.ConfigKey]struct{}{},
		backingOff:  map[model.ConfigKey]struct{}{},
	}
	for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
		src.RegisterEventHandler(kind, w.onEvent)
	}
	return w, nil
}

// Leading reports whether this writer currently writes (holds the Lease,
// or leader election is off and Lead runs).
func (w *Writer) Leading() bool { return w.leading() }

// Pending is the number of objects queued, being written, or waiting to be
// retried: 0 when the writer is idle. It is meshbridge_kube_queue_depth.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.outstanding) + w.inflight
}

// enqueue queues key; retry does so after key's backoff.
func (w *Writer) enqueue(key model.ConfigKey, retry bool) {
	w.mu.Lock()
	w.outstanding[key] = struct{}{}
	if retry {
		w.backingOff[key] = struct{}{}
	}
	queueDepth.Set(float64(len(w.outstanding) + w.inflight))
	w.mu.Unlock()
	if retry {
		w.queue.AddRateLimited(key)
	} else {
		w.queue.Add(key)
	}
}

// LastResync is when the last successful list of the apiserver's objects
// finished (zero before the first); every object it queued is then either
// pending or done.
func (w *Writer) LastResync() time.Time {
	if t := w.lastResync.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

func (w *Writer) onEvent(old, cur *model.Config, _ model.Event) {
	if !w.leading() {
		return // leadership starts with a resync that queues everything
	}
	c := cur
	if c == nil {
		c = old
	}
	if c.Namespace != w.opts.Namespace {
		return
	}
	w.enqueue(c.Key(), false)
}

func (w *Writer) leading() bool { return w.leaders.Load() > 0 }

// Run runs the workers until ctx is done. They write only while a Lead call
// is active; Run alone writes nothing.
func (w *Writer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range w.opts.Workers {
		wg.Go(func() {
			for w.processNext(ctx) {
			}
		})
	}
	wg.Wait()
}

// Lead makes this writer the one that writes, until ctx is done: it lists
// the apiserver's objects of ours, queues every desired and every listed
// object (garbage collection and drift), and does so again every
// ResyncPeriod. A failed list is retried with backoff up to MaxRetryDelay.
// Writes stop being started as soon as ctx is done; requests in flight
// finish. The caller must start Lead only once the store holds every
// registry's first listing, or what is not there yet may be deleted.
func (w *Writer) Lead(ctx context.Context) {
	w.leaders.Add(1)
	leader.Set(1)
	w.log.Info("Writing to Kubernetes", "namespace", w.opts.Namespace)
	var once sync.Once
	release := func() {
		once.Do(func() {
			if w.leaders.Add(-1) == 0 {
				leader.Set(0)
			}
		})
	}
	// Stop starting writes the moment leadership ends, not when this
	// goroutine next runs.
	stop := context.AfterFunc(ctx, release)
	defer func() {
		stop()
		release()
		w.log.Info("Stopped writing to Kubernetes")
	}()
	for {
		b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(baseRetryDelay),
			backoff.WithMaxInterval(MaxRetryDelay), backoff.WithMaxElapsedTime(0))
		err := backoff.RetryNotify(func() error { return w.resync(ctx) }, backoff.WithContext(b, ctx),
			func(err error, next time.Duration) {
				w.log.Warn("Listing objects failed; retrying", "err", err, "retryIn", next)
			})
		if err != nil {
			return // ctx done
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.opts.ResyncPeriod):
		}
	}
}

// resync replaces the view of the apiserver with a fresh list of our
// objects and queues every listed and every desired key. What workers learnt
// while the list was in flight is newer than the list and is kept; older
// rejections are forgotten, so refused content is tried once more per
// resync.
func (w *Writer) resync(ctx context.Context) error {
	w.mu.Lock()
	listSeq := w.seq
	w.mu.Unlock()
	live := map[model.ConfigKey]liveState{}
	for kind, kc := range w.kinds {
		objs, err := kc.list(ctx, w.opts.Namespace, w.ours)
		if err != nil {
			return fmt.Errorf("list %ss in %s: %w", kind, w.opts.Namespace, err)
		}
		for _, o := range objs {
			live[model.ConfigKey{Kind: kind, Namespace: w.opts.Namespace, Name: o.Name}] = stateOf(o)
		}
	}
	listed := slices.Collect(maps.Keys(live))
	w.mu.Lock()
	for key, st := range w.live {
		if st.seq > listSeq {
			live[key] = st
		}
	}
	for key, st := range live {
		if st.gone {
			delete(live, key)
		}
	}
	w.live = live // the workers' from now on
	maps.DeleteFunc(w.rejected, func(_ model.ConfigKey, r rejection) bool { return r.seq <= listSeq })
	w.mu.Unlock()
	for _, key := range listed {
		w.enqueue(key, false)
	}
	desired := 0
	for kind := range w.kinds {
		for _, c := range w.src.List(kind, w.opts.Namespace) {
			w.enqueue(c.Key(), false)
			desired++
		}
	}
	now := time.Now()
	w.lastResync.Store(&now)
	w.log.Debug("Resynced with the apiserver", "live", len(listed), "desired", desired)
	return nil
}

func stateOf(o *liveObject) liveState {
	return liveState{hash: o.Hash, uid: o.UID, registry: o.Labels[model.LabelRegistry]}
}

func (w *Writer) processNext(ctx context.Context) bool {
	key, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	w.mu.Lock()
	delete(w.outstanding, key)
	delete(w.backingOff, key)
	w.inflight++
	w.mu.Unlock()
	defer func() {
		w.queue.Done(key)
		w.mu.Lock()
		w.inflight--
		queueDepth.Set(float64(len(w.outstanding) + w.inflight))
		w.mu.Unlock()
	}()
	answered := w.answered.Load()
	if err := w.sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			return true
		}
		w.log.Warn("Kubernetes write failed; retrying", "object", key.String(), "err", err,
			"attempt", w.queue.NumRequeues(key)+1)
		w.enqueue(key, true)
		return true
	}
	if w.queue.NumRequeues(key) > 0 && w.answered.Load() > answered {
		// A retry went through: the apiserver is back. Retry the others
		// now instead of when their backoff (up to MaxRetryDelay) ends.
		w.retryNow()
	}
	w.queue.Forget(key)
	return true
}

// retryNow queues every key waiting out a backoff at once. Their backoff
// is kept (a key that fails again waits longer, so a false alarm cannot
// start a storm) and is reset when the key succeeds; the delayed add still
// pending for each becomes a no-op sync.
func (w *Writer) retryNow() {
	w.mu.Lock()
	keys := slices.Collect(maps.Keys(w.backingOff))
	clear(w.backingOff)
	w.mu.Unlock()
	for _, key := range keys {
		w.queue.Add(key)
	}
}

// observe counts err as an answer from the apiserver unless it is a
// transport failure (no HTTP status), and returns it.
func (w *Writer) observe(err error) error {
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) {
		w.answered.Add(1)
	}
	return err
}

// isOurs reports whether labels mark an object as written by this bridge.
func (w *Writer) isOurs(labels map[string]string) bool {
	return labels[model.LabelManagedBy] == model.ManagedByValue &&
		slices.Contains(w.opts.Registries, labels[model.LabelRegistry])
}

// state returns what the apiserver holds under key, if known.
func (w *Writer) state(key model.ConfigKey) (liveState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.live[key]
	return st, ok && !st.gone
}

// setState records what the apiserver holds under key: st, or nothing when
// ok is false.
func (w *Writer) setState(key model.ConfigKey, st liveState, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	st.seq = w.seq
	if !ok {
		st = liveState{gone: true, seq: w.seq}
	}
	w.live[key] = st
}

// sync makes the apiserver's object under key match the store's. A non-nil
// error is retried with backoff.
func (w *Writer) sync(ctx context.Context, key model.ConfigKey) error {
	if !w.leading() {
		return nil
	}
	kc := w.kinds[key.Kind]
	desired := w.src.Get(key.Kind, key.Name, key.Namespace)
	st, known := w.state(key)
	if desired == nil {
		if !known || st.foreign {
			return nil
		}
		if w.opts.RegistrySynced != nil && !w.opts.RegistrySynced(st.registry) {
			return nil // not known yet is not gone
		}
		return w.delete(ctx, kc, key, st)
	}
	if !known {
		lo, err := kc.get(ctx, key.Namespace, key.Name)
		w.observe(err)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			writes.WithLabelValues("create", "error").Inc()
			return fmt.Errorf("get before create: %w", err)
		case !w.isOurs(lo.Labels):
			conflicts.Inc()
			w.log.Warn("Not writing: an object without meshbridge's ownership labels has this name",
				"object", key.String(), "labels", lo.Labels)
			w.setState(key, liveState{foreign: true}, true)
			return nil
		default:
			st, known = stateOf(lo), true
			w.setState(key, st, true)
		}
	}
	if known && st.foreign {
		return nil
	}
	hash := desired.ContentHash()
	if known && st.hash == hash && hash != "" {
		return nil
	}
	w.mu.Lock()
	refused := w.rejected[key].hash == hash
	w.mu.Unlock()
	if refused {
		return nil
	}
	op := "create"
	if known {
		op = "update"
	}
	if err := checkSize(desired); err != nil {
		writes.WithLabelValues(op, "too_large").Inc()
		w.reject(key, hash, err)
		return nil
	}
	if !w.leading() {
		return nil
	}
	lo, err := kc.apply(ctx, desired)
	if w.observe(err) != nil {
		if permanent(err) {
			writes.WithLabelValues(op, "invalid").Inc()
			w.reject(key, hash, err)
			return nil
		}
		writes.WithLabelValues(op, "error").Inc()
		return fmt.Errorf("apply: %w", err)
	}
	writes.WithLabelValues(op, "ok").Inc()
	w.setState(key, stateOf(lo), true)
	return nil
}

func (w *Writer) delete(ctx context.Context, kc kindClient, key model.ConfigKey, st liveState) error {
	if !w.leading() {
		return nil
	}
	err := w.observe(kc.delete(ctx, key.Namespace, key.Name, st.uid))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		writes.WithLabelValues("delete", "ok").Inc()
		w.setState(key, liveState{}, false)
		return nil
	case apierrors.IsConflict(err):
		// The UID precondition failed: the name now holds another object.
		// Forget it; the next event or resync looks again.
		writes.WithLabelValues("delete", "ok").Inc()
		w.setState(key, liveState{}, false)
		return nil
	default:
		writes.WithLabelValues("delete", "error").Inc()
		return fmt.Errorf("delete: %w", err)
	}
}

// reject records that the apiserver will not take this content of key.
func (w *Writer) reject(key model.ConfigKey, hash string, err error) {
	w.mu.Lock()
	w.seq++
	w.rejected[key] = rejection{hash: hash, seq: w.seq}
	w.mu.Unlock()
	w.log.Error("Kubernetes refused object; not retrying until it changes", "object", key.String(), "err", err)
}

// checkSize refuses objects whose apply request exceeds
// translate.MaxObjectBytes (about etcd's request limit).
func checkSize(cfg *model.Config) error {
	body, err := requestBody(cfg)
	if err != nil {
		return err
	}
	if len(body) > translate.MaxObjectBytes {
		return fmt.Errorf("object is %d bytes, over the limit of %d", len(body), translate.MaxObjectBytes)
	}
	return nil
}

// permanent reports whether the apiserver would answer the same request the
// same way: a validation failure, a malformed request or an oversized one.
// Authorization, missing namespaces, conflicts, throttling and server errors
// are retried: an operator or time fixes them.
func permanent(err error) bool {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusUnsupportedMediaType || code == http.StatusNotAcceptable
	}
	return false
}
