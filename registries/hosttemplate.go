package registries

import (
	"strings"
	"text/template"
)

// HostTemplate is a compiled host template: a text/template that names a
// service's mesh host from the fields of the data it was checked against.
// A registry's hostTemplate (package translate) and Dubbo's interface- and
// application-level templates (package registries/dubbo) are both
// HostTemplates, so that they follow one rule: a template that references a
// field its data lacks fails when it is parsed, at startup, never per
// service. Safe for concurrent use.
type HostTemplate struct{ t *template.Template }

// ParseHostTemplate parses text and executes it once on sample (a struct
// with every field the template may read, option missingkey=error), so
// that an unknown field or a syntax error is the returned error, e.g.
// `template: host:1: unexpected "}" in operand`.
func ParseHostTemplate(text string, sample any) (*HostTemplate, error) {
	t, err := template.New("host").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	if err := t.Execute(&strings.Builder{}, sample); err != nil {
		return nil, err
	}
	return &HostTemplate{t: t}, nil
}

// Execute returns the template applied to data, a value of the sample's
// type: the raw host, which package translate lower-cases and validates.
func (h *HostTemplate) Execute(data any) (string, error) {
	var b strings.Builder
	if err := h.t.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}
