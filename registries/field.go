package registries

import (
	"errors"
	"fmt"
)

// FieldError is an invalid key of a configuration block: Field is the key's
// path inside the block ("maxWatches", "tls.caFile", "servers[1]",
// "dubbo.mode"), Err what is wrong with its value. Its text is
// "<Field>: <Err>". The command places it under the block's own path
// (registries[0].consul.maxWatches) by errors.As, never by parsing the text;
// an error about several keys at once ("tls.certFile and tls.keyFile: set
// both or neither") is a plain error, reported at the block's path.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Invalid returns a *FieldError for field whose Err is fmt.Errorf(format,
// args...) (so %w wraps).
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Nested returns err as an error of the block under key parent: a
// *FieldError's field gets the prefix ("dubbo" and "mode" make
// "dubbo.mode"); any other error becomes the error of parent itself.
func Nested(parent string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: parent + "." + fe.Field, Err: fe.Err}
	}
	return &FieldError{Field: parent, Err: err}
}
