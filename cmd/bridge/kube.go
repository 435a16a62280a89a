package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	versioned "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshbridge/meshbridge/kube"
	"github.com/meshbridge/meshbridge/policy"
)

// kubeOutput is the Kubernetes output when kubernetes.enabled: the writer
// and the client its leader election uses.
type kubeOutput struct {
	writer *kube.Writer
	client kubernetes.Interface
	// limiters are the clients' rate limits (kubernetes.qps, burst): the
	// writer's and leader election's; a reload changes them in place.
	limiters [2]*kube.RateLimiter
	// errs is the last error the writer logged (/debug/kubez, errtap.go).
	errs *lastError
}

// restConfig loads kubernetes.kubeconfig, or the in-cluster config when it
// is "", with the configured client rate limit.
func restConfig(k KubernetesConfig) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	if k.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes: no kubeconfig set and not running in a cluster: %w", err)
		}
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig: %w", err)
		}
	}
	return limited(rc, k), nil
}

// policyKubernetes is the cluster policy.kubernetes reads from: the
// kubernetes block's connection and client rate limit.
func policyKubernetes(cfg *Config) (*policy.KubernetesConfig, error) {
	rc, err := restConfig(cfg.Kubernetes)
	if err != nil {
		return nil, fmt.Errorf("policy.kubernetes: %w", err)
	}
	client, err := versioned.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("policy.kubernetes: %w", err)
	}
	return &policy.KubernetesConfig{Client: client, Namespaces: cfg.Policy.Kubernetes.Namespaces}, nil
}

// limited sets rc's client rate limit (kubernetes.qps, burst) and user
// agent, and returns it.
func limited(rc *rest.Config, k KubernetesConfig) *rest.Config {
	rc.QPS, rc.Burst = k.QPS, k.Burst
	rc.UserAgent = "meshbridge/" + version
	return rc
}

// diffRESTConfig is the client configuration of meshbridge translate
// --diff, found as kubectl and istioctl find theirs (client-go's default
// loading rules): explicit (--kubeconfig), else kubernetes.kubeconfig,
// else $KUBECONFIG, else ~/.kube/config, else the in-cluster config.
func diffRESTConfig(k KubernetesConfig, explicit string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = cmp.Or(explicit, k.Kubeconfig)
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("kubernetes: no cluster to compare with: give --kubeconfig, set kubernetes.kubeconfig or " +
				"KUBECONFIG, or create ~/.kube/config")
		}
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return limited(rc, k), nil
}

// newKubeOutput builds the writer on the bridge's store. It contacts no
// server; an unreachable apiserver shows up as retried writes.
func (b *bridge) newKubeOutput(registryNames []string) (*kubeOutput, error) {
	k := b.config().Kubernetes
	rc, err := restConfig(k)
	if err != nil {
		return nil, err
	}
	// The writer's clients share one limit; leader election has its own,
	// so that Lease renewals never queue behind writes.
	limiter, leLimiter := kube.NewRateLimiter(k.QPS, k.Burst), kube.NewRateLimiter(k.QPS, k.Burst)
	leConfig := rest.CopyConfig(rc)
	leConfig.RateLimiter = leLimiter
	rc.RateLimiter = limiter
	istio, err := versioned.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	client, err := kubernetes.NewForConfig(leConfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	errs := &lastError{}
	log := slog.New(errorTap{next: b.log.Handler(), last: errs})
	w, err := kube.NewWriter(b.store, kube.Options{
		Namespace:      b.config().Output.Namespace,
		Registries:     registryNames,
		Instance:       b.config().Output.Instance,
		Client:         istio,
		Metadata:       md,
		RegistrySynced: b.syncer.RegistrySynced,
		ResyncPeriod:   k.ResyncPeriod.Duration,
		Logger:         log,
	})
	if err != nil {
		return nil, err
	}
	return &kubeOutput{writer: w, client: client, limiters: [2]*kube.RateLimiter{limiter, leLimiter}, errs: errs}, nil
}

// runKube runs the writer's workers and, once the aggregate registry has
// synced (so garbage collection sees every registry's objects), leads: at
// once without leader election, else while holding the Lease.
func (b *bridge) runKube(ctx context.Context) error {
	go b.kube.writer.Run(ctx)
	select {
	case <-ctx.Done():
		return nil
	case <-b.ready:
	}
	le := b.config().Kubernetes.LeaderElection
	if !*le.Enabled {
		b.kube.writer.Lead(ctx)
		return nil
	}
	return kube.RunLeaderElection(ctx, b.kube.client, kube.LeaderElection{
		LeaseName:      le.LeaseName,
		LeaseNamespace: le.LeaseNamespace,
		LeaseDuration:  le.LeaseDuration.Duration,
		RenewDeadline:  le.RenewDeadline.Duration,
		RetryPeriod:    le.RetryPeriod.Duration,
	}, b.log, b.kube.writer.Lead)
}
