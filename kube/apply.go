package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/translate"
)

// write carries out plan's OpCreate or OpUpdate: a server-side apply of the
// desired object, whose response is recorded as the apiserver's copy. A
// non-nil error is retried with backoff.
func (w *Writer) write(ctx context.Context, act action) error {
	hash := act.desired.ContentHash()
	if err := checkSize(act.desired); err != nil {
		writes.WithLabelValues(act.op, "too_large").Inc()
		w.reject(act.key, hash, err)
		return nil
	}
	if !w.leading() {
		return nil
	}
	lo, err := w.kinds[act.key.Kind].apply(ctx, act.desired)
	if w.observe(err) != nil {
		if permanent(err) {
			writes.WithLabelValues(act.op, "invalid").Inc()
			w.reject(act.key, hash, err)
			return nil
		}
		writes.WithLabelValues(act.op, "error").Inc()
		return fmt.Errorf("apply: %w", err)
	}
	writes.WithLabelValues(act.op, "ok").Inc()
	w.learn(act.key, stateOf(lo), fromWrite)
	return nil
}

// remove carries out plan's OpDelete, with the object's UID as
// precondition. A non-nil error is retried with backoff.
func (w *Writer) remove(ctx context.Context, act action) error {
	if !w.leading() {
		return nil
	}
	err := w.observe(w.kinds[act.key.Kind].delete(ctx, act.key.Namespace, act.key.Name, act.uid))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		writes.WithLabelValues(OpDelete, "ok").Inc()
		w.forget(act.key, act.uid, true)
		return nil
	case apierrors.IsConflict(err):
		// The UID precondition failed: the name now holds another object.
		// Forget it; its watch event, the next event or resync looks again.
		writes.WithLabelValues(OpDelete, "ok").Inc()
		w.forget(act.key, act.uid, true)
		return nil
	default:
		writes.WithLabelValues(OpDelete, "error").Inc()
		return fmt.Errorf("delete: %w", err)
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
