package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures the coordination.k8s.io Lease that decides which
// replica writes (client-go's leaderelection). Every replica keeps serving
// xDS; only the lease holder writes.
type LeaderElection struct {
	// LeaseName and LeaseNamespace name the Lease object.
	LeaseName, LeaseNamespace string
	// Identity is this replica's holder identity; "" means
	// "<hostname>_<random UUID>".
	Identity string
	// LeaseDuration is how long non-leaders wait after the last renewal
	// before taking over (the failover time after a crash, plus up to one
	// RetryPeriod). RenewDeadline is how long the leader keeps retrying a
	// renewal before it gives up leading; RetryPeriod is the interval
	// between attempts. client-go requires LeaseDuration > RenewDeadline >
	// RetryPeriod × 1.2.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunLeaderElection campaigns for the lease until ctx is done and calls lead
// with a context that ends when leadership ends (a failed renewal, or ctx).
// After losing the lease it campaigns again. On ctx's end a held lease is
// released, so a successor takes over within one RetryPeriod instead of
// LeaseDuration. The error is for an invalid configuration only.
func RunLeaderElection(ctx context.Context, client kubernetes.Interface, cfg LeaderElection, log *slog.Logger, lead func(context.Context)) error {
	if cfg.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader election identity: %w", err)
		}
		cfg.Identity = host + "_" + string(uuid.NewUUID())
	}
	if cfg.LeaseName == "" || cfg.LeaseNamespace == "" {
		return errors.New("leader election: lease name and namespace are required")
	}
	log = log.With("component", "leader-election", "lease", cfg.LeaseNamespace+"/"+cfg.LeaseName, "identity", cfg.Identity)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.LeaseName, Namespace: cfg.LeaseNamespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("Acquired the lease")
				lead(ctx)
			},
			OnStoppedLeading: func() { log.Debug("Not leading") },
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.Info("Another replica holds the lease", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	for ctx.Err() == nil {
		le.Run(ctx) // returns when leadership is lost or ctx is done
	}
	releaseIfHeld(lock, cfg.Identity, log)
	return nil
}

// releaseTimeout bounds releaseIfHeld's requests.
const releaseTimeout = 5 * time.Second

// releaseIfHeld releases the Lease when its record names identity, as
// client-go's ReleaseOnCancel does for a lease the elector knows it holds:
// holder cleared, duration 1 s, so that another replica takes over at once.
// The elector does not know it holds a Lease whose creation (or renewal)
// the apiserver applied after the elector's context was cancelled, as a
// SIGTERM right after start cancels it ("Error initially creating lease
// lock ... context canceled"); without this, the Lease would stay held for
// LeaseDuration with nobody writing. Errors are logged: the Lease then
// expires on its own.
func releaseIfHeld(lock *resourcelock.LeaseLock, identity string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		log.Warn("Could not check the lease at shutdown; it expires on its own", "err", err)
		return
	case rec.HolderIdentity != identity:
		return
	}
	now := metav1.Now()
	err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	})
	if err != nil {
		log.Warn("Could not release the lease at shutdown; it expires on its own", "err", err)
		return
	}
	log.Info("Released the lease")
}
