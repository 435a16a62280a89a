package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/metadata"
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
	// only namespace listed, watched and garbage-collected.
	Namespace string
	// Instance is output.instance, a label value: when set, an object is
	// ours only when it carries meshbridge.io/instance with this value;
	// when "", only when it carries none (or an empty one). It must be the
	// translators' translate.Options.Instance: the writer writes only
	// objects that are its own.
	Instance string
	// Registries are the registries the writer knows from the start; the
	// set grows with AddRegistry and never shrinks. An object is ours only
	// when it carries app.kubernetes.io/managed-by=meshbridge, the instance
	// label (see Instance) and a meshbridge.io/registry label naming a
	// known registry.
	Registries []string
	// Client is the istio.io/client-go clientset (networking.istio.io/v1).
	Client versioned.Interface
	// Metadata is the client of the watch on the writer's own objects
	// (k8s.io/client-go/metadata: labels and annotations, not specs).
	Metadata metadata.Interface
	// RegistrySynced reports whether a registry delivered its first
	// listing. Objects of a registry that has not are never deleted: the
	// store not holding them means "not known yet" (docs/design.md §8). nil
	// means every registry has synced.
	RegistrySynced func(registry string) bool
	// ResyncPeriod is how often the leader lists the apiserver's objects,
	// garbage-collects and corrects drift the watch missed. Default
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Workers is the number of concurrent writes. Default DefaultWorkers.
	Workers int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Writer writes the aggregate store's ServiceEntries and WorkloadEntries to
// Kubernetes as networking.istio.io/v1 objects (README "Kubernetes output"):
//
//   - A store handler and a watch on the writer's own objects queue the key
//     of every changed object on a rate-limited client-go workqueue; a key
//     is queued at most once, and a worker reads the latest desired state
//     from the store when it gets it.
//   - What to do with a key is plan's decision (plan.go), which translate
//     --diff shares: server-side apply with field manager "meshbridge" when
//     the object's meshbridge.io/content-hash differs from the apiserver's
//     copy or someone else changed the copy, delete (with a UID
//     precondition) when the object is ours and no longer desired, nothing
//     for an object without our ownership labels
//     (meshbridge_kube_conflicts_total).
//   - While leading, a metadata-only watch on the writer's own objects
//     restores an object deleted or edited by hand at once; meshbridge's
//     own writes coming back through it cost nothing. A resync every
//     ResyncPeriod lists the objects again, garbage-collects and corrects
//     what the watch missed.
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
	known *registrySet // the registries whose objects may be ours
	rules planRules
	kinds map[model.Kind]kindClient
	ours  string // the label selector of the objects that may be ours
	queue workqueue.TypedRateLimitingInterface[model.ConfigKey]

	// leaders counts the active Lead calls; listed is set once the first
	// resync of a leadership is merged, and cleared when the last Lead
	// ends. Both change under mu; leading reads them without it.
	leaders    atomic.Int32
	listed     atomic.Bool
	answered   atomic.Int64 // requests the apiserver answered (any status)
	lastResync atomic.Pointer[time.Time]

	mu sync.Mutex
	// live is what the apiserver holds under our names: from the last
	// resync's list, then from every lookup, write response and watch event
	// since (live.go). A deleted object stays as a tombstone (gone) until
	// the next resync. Valid while leading.
	live map[model.ConfigKey]liveState
	// rejected maps a key to the content the apiserver refused with a
	// permanent error; that content is not sent again.
	rejected map[model.ConfigKey]rejection
	// seq orders what workers learn against resync lists: every entry of
	// live and rejected records the seq of when it was learnt.
	seq uint64
	// outstanding are the keys queued or waiting out a retry's backoff;
	// inflight the keys being synced. The distinct keys of both are the
	// queue depth (the workqueue's Len misses keys in backoff; a key being
	// synced may be queued again meanwhile, and counts once).
	outstanding map[model.ConfigKey]struct{}
	inflight    map[model.ConfigKey]struct{}
	// backingOff are the outstanding keys waiting out a retry's backoff.
	backingOff map[model.ConfigKey]struct{}
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
	case opts.Metadata == nil:
		return nil, errors.New("kube: no metadata client")
	case opts.Namespace == "":
		return nil, errors.New("kube: no namespace")
	}
	if err := translate.ValidateLabelValue(opts.Instance); err != nil {
		return nil, fmt.Errorf("kube: instance: %w", err)
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
	known := newRegistrySet(opts.Registries)
	rules := planRules{namespace: opts.Namespace, instance: opts.Instance, known: known.has, synced: opts.RegistrySynced}
	w := &Writer{
		opts:  opts,
		log:   opts.Logger.With("component", "kube"),
		src:   src,
		known: known,
		rules: rules,
		kinds: kindClients(opts.Client),
		ours:  rules.selector(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[model.ConfigKey](baseRetryDelay, MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[model.ConfigKey]{Name: "meshbridge-kube"}),
		live:        map[model.ConfigKey]liveState{},
		rejected:    map[model.ConfigKey]rejection{},
		outstanding: map[model.ConfigKey]struct{}{},
		inflight:    map[model.ConfigKey]struct{}{},
		backingOff:  map[model.ConfigKey]struct{}{},
	}
	for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
		src.RegisterEventHandler(kind, w.onEvent)
	}
	return w, nil
}

// AddRegistry makes registry known to the writer for the life of the
// process (see Options.Registries): its objects become ours, to write and,
// once it has synced and the store no longer holds them, to delete. A
// registry is never forgotten, so the objects of one removed from the
// configuration while the process runs are deleted with it; one removed
// between restarts is not known to the new process, and its objects stay.
// Call it before the registry's objects reach the store; when it adds a
// registry while leading, the keys of its objects the store or the
// apiserver holds are queued again. Idempotent and safe for concurrent
// use.
func (w *Writer) AddRegistry(registry string) {
	if !w.known.add(registry) {
		return
	}
	w.log.Info("Registry known to the Kubernetes output", "registry", registry)
	if !w.leading() {
		return // leadership starts with a resync that queues everything
	}
	var keys []model.ConfigKey
	w.mu.Lock()
	for key, st := range w.live {
		if !st.gone && st.registry == registry {
			keys = append(keys, key)
		}
	}
	w.mu.Unlock()
	for kind := range w.kinds {
		for _, c := range w.src.List(kind, w.opts.Namespace) {
			if c.Labels[model.LabelRegistry] == registry {
				keys = append(keys, c.Key())
			}
		}
	}
	for _, key := range keys {
		w.enqueue(key, false)
	}
}

// Leading reports whether this writer currently writes (holds the Lease,
// or leader election is off and Lead runs).
func (w *Writer) Leading() bool { return w.leading() }

// Pending is the number of objects queued, being written, or waiting to be
// retried: 0 when the writer is idle. It is meshbridge_kube_queue_depth.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.depthLocked()
}

// depthLocked is Pending with w.mu held: the distinct keys outstanding or
// in flight.
func (w *Writer) depthLocked() int {
	n := len(w.outstanding)
	for key := range w.inflight {
		if _, queued := w.outstanding[key]; !queued {
			n++
		}
	}
	return n
}

// enqueue queues key; retry does so after key's backoff.
func (w *Writer) enqueue(key model.ConfigKey, retry bool) {
	w.mu.Lock()
	w.outstanding[key] = struct{}{}
	if retry {
		w.backingOff[key] = struct{}{}
	}
	queueDepth.Set(float64(w.depthLocked()))
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

func (w *Writer) onEvent(old, cur model.Object, _ model.Event) {
	if !w.leading() {
		return // leadership starts with a resync that queues everything
	}
	c := cur
	if c == nil {
		c = old
	}
	key := c.Key()
	if key.Namespace != w.opts.Namespace {
		return
	}
	w.enqueue(key, false)
}

// leading reports whether the writer writes: a Lead call is active and its
// leadership's first list of the apiserver is merged into live. Before
// that list, a worker would know nothing of the apiserver and look up each
// key on its own, only for the list to replace what it learnt: a key
// queued then is queued again by the resync (it queues every desired and
// every listed key), so nothing is queued or written before it, as a
// Kubernetes controller starts its workers once its informers have synced.
// A conflict is thus detected once per resync.
func (w *Writer) leading() bool { return w.listed.Load() && w.leaders.Load() > 0 }

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

// Lead makes this writer the one that writes, until ctx is done: it
// forgets what it knew of the apiserver from an earlier leadership, watches
// its own objects (watch.go), lists them, queues every desired and every
// listed object (garbage collection and drift), and lists again every
// ResyncPeriod. A failed list is retried with backoff up to MaxRetryDelay.
// Writes stop being started as soon as ctx is done; requests in flight
// finish. The caller must start Lead only once the store holds every
// registry's first listing, or what is not there yet may be deleted.
func (w *Writer) Lead(ctx context.Context) {
	w.mu.Lock()
	if w.leaders.Add(1) == 1 {
		// Another replica may have written since this one last led.
		w.live = map[model.ConfigKey]liveState{}
	}
	w.mu.Unlock()
	leader.Set(1)
	w.log.Info("Writing to Kubernetes", "namespace", w.opts.Namespace, "instance", w.opts.Instance)
	var once sync.Once
	release := func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.leaders.Add(-1) == 0 {
				w.listed.Store(false)
				leader.Set(0)
			}
		})
	}
	// Stop starting writes the moment leadership ends, not when this
	// goroutine next runs.
	stop := context.AfterFunc(ctx, release)
	var watches sync.WaitGroup
	defer func() {
		stop()
		release()
		watches.Wait()
		w.log.Info("Stopped writing to Kubernetes")
	}()
	w.watch(ctx, &watches)
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
// objects, merged with what was known (merge: an object changed since
// meshbridge knew it in sync is applied again), and queues every listed and
// every desired key. What workers learnt while the list was in flight is
// newer than the list and is kept; older rejections are forgotten, so
// refused content is tried once more per resync.
func (w *Writer) resync(ctx context.Context) error {
	w.mu.Lock()
	listSeq := w.seq
	w.mu.Unlock()
	listed := map[model.ConfigKey]liveState{}
	for kind, kc := range w.kinds {
		objs, err := kc.list(ctx, w.opts.Namespace, w.ours)
		if err != nil {
			return fmt.Errorf("list %ss in %s: %w", kind, w.opts.Namespace, err)
		}
		for _, o := range objs {
			listed[model.ConfigKey{Kind: kind, Namespace: w.opts.Namespace, Name: o.Name}] = stateOf(o)
		}
	}
	w.mu.Lock()
	live := make(map[model.ConfigKey]liveState, len(listed))
	for key, obs := range listed {
		old, had := w.live[key]
		live[key], _ = merge(old, had, obs, fromList)
	}
	for key, st := range w.live {
		if st.seq > listSeq {
			live[key] = st
		}
	}
	maps.DeleteFunc(live, func(_ model.ConfigKey, st liveState) bool { return st.gone })
	w.live = live // the workers' from now on
	maps.DeleteFunc(w.rejected, func(_ model.ConfigKey, r rejection) bool { return r.seq <= listSeq })
	if w.leaders.Load() > 0 {
		// From here on, events queue their keys: what the store holds
		// before this point, the List below queues.
		w.listed.Store(true)
	}
	w.mu.Unlock()
	for key := range listed {
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

func (w *Writer) processNext(ctx context.Context) bool {
	key, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	w.mu.Lock()
	delete(w.outstanding, key)
	delete(w.backingOff, key)
	w.inflight[key] = struct{}{}
	w.mu.Unlock()
	defer func() {
		w.queue.Done(key)
		w.mu.Lock()
		delete(w.inflight, key)
		queueDepth.Set(float64(w.depthLocked()))
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

// sync makes the apiserver's object under key match the store's: it learns
// what the apiserver holds under a desired name it knows nothing of, then
// carries out plan's decision. A non-nil error is retried with backoff.
func (w *Writer) sync(ctx context.Context, key model.ConfigKey) error {
	if !w.leading() {
		return nil
	}
	desired := w.src.Get(key.Kind, key.Name, key.Namespace)
	if desired != nil && !w.rules.ownsLabels(desired.Labels) {
		w.log.Warn("Not writing: the object would not be meshbridge's once written (its registry is not known to "+
			"the writer, or its instance label is not output.instance)", "object", key.String(), "labels", desired.Labels,
			"instance", w.opts.Instance)
		return nil
	}
	st, known := w.state(key)
	if desired != nil && !known {
		var err error
		if st, known, err = w.lookup(ctx, key); err != nil {
			return err
		}
	}
	var live *liveState
	if known {
		live = &st
	}
	w.mu.Lock()
	refused := w.rejected[key].hash
	w.mu.Unlock()
	act, ok := w.rules.decide(key, desired, live, refused)
	if !ok {
		return nil
	}
	switch act.op {
	case OpCreate, OpUpdate:
		return w.write(ctx, act)
	case OpDelete:
		return w.remove(ctx, act)
	}
	return nil // OpConflict: counted and logged by lookup
}

// lookup reads the object under key from the apiserver and records it. An
// object without our ownership labels is counted and logged as a conflict.
func (w *Writer) lookup(ctx context.Context, key model.ConfigKey) (liveState, bool, error) {
	lo, err := w.kinds[key.Kind].get(ctx, key.Namespace, key.Name)
	w.observe(err)
	switch {
	case apierrors.IsNotFound(err):
		return liveState{}, false, nil
	case err != nil:
		writes.WithLabelValues(OpCreate, "error").Inc()
		return liveState{}, false, fmt.Errorf("get before create: %w", err)
	}
	st := stateOf(lo)
	w.learn(key, st, fromList)
	if !w.rules.ours(st) {
		conflicts.Inc()
		w.log.Warn("Not writing: an object without meshbridge's ownership labels has this name",
			"object", key.String(), "labels", lo.Labels)
	}
	st, known := w.state(key)
	return st, known, nil
}
