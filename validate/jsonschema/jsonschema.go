package jsonschema

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tierguard/tierguard/validate"
)

// schemaURL is the name the schema is compiled under; it never leaves the
// process.
const schemaURL = "tierguard:///output.schema.json"

// Compile compiles schema (a JSON Schema document, draft 2020-12 unless it
// says otherwise in $schema) and returns a validator for texts that must
// be a JSON value matching it. External $refs are refused: a schema must
// not make the process fetch files or URLs at validation time.
//
// A rejection is a *validate.Error of rule "json_schema" that names the
// schema keyword that failed (for example "/properties/amount/type"),
// never the value.
func Compile(schema []byte) (validate.Validator[string], error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("jsonschema: JSON schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("jsonschema: JSON schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("jsonschema: JSON schema does not compile: %w", err)
	}
	wellFormed := validate.JSON()
	return validate.Func[string](func(s string) error {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err != nil {
			// validate.JSON says where, without quoting the text.
			reason := "malformed JSON"
			var ve *validate.Error
			if errors.As(wellFormed.Validate(s), &ve) {
				reason = ve.Reason
			}
			return &validate.Error{Rule: "json_schema", Reason: reason}
		}
		if err := sch.Validate(inst); err != nil {
			return &validate.Error{Rule: "json_schema", Reason: schemaReason(err)}
		}
		return nil
	}), nil
}

// schemaReason reports the keyword location of the first leaf failure.
func schemaReason(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "does not match the schema"
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	// The keyword's location is the failing subschema's pointer plus the
	// keyword path: both come from the schema, not from the answer.
	_, sub, _ := strings.Cut(ve.SchemaURL, "#")
	path := ve.ErrorKind.KeywordPath()
	if sub == "" && len(path) == 0 {
		return "does not match the schema"
	}
	return "schema keyword " + sub + "/" + strings.Join(path, "/") + " failed"
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("jsonschema: external schema references are not loaded")
}
