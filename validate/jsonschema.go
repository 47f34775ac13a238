package validate

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaURL is the name the schema is compiled under; it never leaves the
// process.
const schemaURL = "tierguard:///output.schema.json"

// JSONSchema compiles schema (a JSON Schema document, draft 2020-12 unless
// it says otherwise in $schema) and returns a validator for texts that must
// be a JSON value matching it. External $refs are refused: a schema must
// not make the process fetch files or URLs at validation time.
//
// A rejection names the schema keyword that failed (for example
// "/properties/amount/type"), never the value.
func JSONSchema(schema []byte) (Validator[string], error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("validate: JSON schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("validate: JSON schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("validate: JSON schema does not compile: %w", err)
	}
	return Func[string](func(s string) error {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err != nil {
			return &Error{Rule: "json_schema", Reason: "malformed JSON" + syntaxOffset(s)}
		}
		if err := sch.Validate(inst); err != nil {
			return &Error{Rule: "json_schema", Reason: schemaReason(err)}
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
	return nil, errors.New("validate: external schema references are not loaded")
}
