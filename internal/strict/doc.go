// Package strict decodes YAML (or JSON) into Go structs and rejects unknown
// keys and ill-typed values with errors that name the field path, e.g.
// `registries[0].consul.adress: unknown field`. encoding/json alone names
// neither the path of an unknown key nor the index of a list element.
//
// A key given twice in one mapping and a second YAML document are errors
// naming the line: a configuration where the last duplicate silently wins, or
// whose second half is silently ignored, is not what its author meant.
//
// Struct fields are matched by their json tags; fields of types that decode
// themselves (json.Unmarshaler, e.g. durations) are not descended into.
package strict
