// Package envconfig reads a service's configuration from environment
// variables into a struct declared once, with tags, and parsed by
// github.com/caarlos0/env. The same declaration gives the service's --help
// (Vars, Usage), the configuration it logs at start with its secrets masked
// (LogValue), and the list the README's configuration table is checked
// against.
//
// A field is a variable when it has an env tag (caarlos0/env's syntax:
// `env:"NAME,required"`, `envDefault:"..."`). This package reads three more
// tags:
//
//	help:"..."     what the variable is for (--help, the README check)
//	secret:"true"  the value is never shown: "***" in logs
//	secret:"url"   a URL whose password (user info, or a query parameter
//	               named like a password, secret or token) shows as xxxxx;
//	               a value that is not a URL is hidden whole (RedactDSN)
//	secret:"endpoint" a URL shown as scheme, host and path only (RedactURL)
//	trim:"false"   the value is used as given (a password); every other
//	               value is trimmed of spaces
//
// A default is the envDefault tag or, without one, the value the struct
// held before parsing (so a default can be a Go constant, and a service can
// give a shared field its own default), never both: a field with a tag and
// a value is a declaration error, so that each default is written once. An
// empty variable is an unset one.
package envconfig

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"
)

// Var is one declared variable.
type Var struct {
	// Name is the variable's name.
	Name string
	// Default is the value used when it is unset, as text; "" for none.
	Default string
	// Help says what it is for.
	Help string
	// Required is set when the service does not start without it.
	Required bool
	// Secret is set when its value is never shown.
	Secret bool

	mask    func(string) string
	keepRaw bool
	tagged  bool // the default is an envDefault tag
	value   reflect.Value
}

// Option changes how Parse reads values.
type Option func(map[reflect.Type]func(string) (any, error))

// WithParser reads the fields of type T with parse. Its error should say
// what is wrong with the value; Parse prefixes it with the variable's name.
func WithParser[T any](parse func(string) (T, error)) Option {
	return func(m map[reflect.Type]func(string) (any, error)) {
		m[reflect.TypeFor[T]()] = func(s string) (any, error) { return parse(s) }
	}
}

// List reads a comma-separated list, dropping spaces and empty items.
func List(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// baseParsers read the types every service uses, with errors that quote
// the value and say what it should be.
func baseParsers() map[reflect.Type]func(string) (any, error) {
	return map[reflect.Type]func(string) (any, error){
		reflect.TypeFor[int](): func(s string) (any, error) {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer", s)
			}
			return n, nil
		},
		reflect.TypeFor[int64](): func(s string) (any, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer", s)
			}
			return n, nil
		},
		reflect.TypeFor[float64](): func(s string) (any, error) {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", s)
			}
			return f, nil
		},
		reflect.TypeFor[bool](): func(s string) (any, error) {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not a boolean", s)
			}
			return b, nil
		},
		reflect.TypeFor[time.Duration](): func(s string) (any, error) {
			d, err := time.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not a duration", s)
			}
			return d, nil
		},
		reflect.TypeFor[[]string](): func(s string) (any, error) { return List(s), nil },
	}
}

// varError is a value's problem, with the variable it came from.
type varError struct {
	name string
	err  error
}

func (e *varError) Error() string { return e.name + ": " + e.err.Error() }
func (e *varError) Unwrap() error { return e.err }

// Parse reads the variables declared by cfg, a pointer to a struct, from
// getenv. It returns every problem at once, each naming its variable; a
// variable that fails to parse leaves its field at the default, so that a
// validation after Parse sees no made-up zero.
func Parse(getenv func(string) string, cfg any, opts ...Option) error {
	vars, err := walk(cfg)
	if err != nil {
		return err
	}
	environ := map[string]string{}
	for _, v := range vars {
		if v.tagged && !v.value.IsZero() {
			return fmt.Errorf("envconfig: %s has two defaults, its envDefault tag and the value %s; declare one", v.Name, format(v.value))
		}
		raw := getenv(v.Name)
		if !v.keepRaw {
			raw = strings.TrimSpace(raw)
		}
		if raw != "" {
			environ[v.Name] = raw
		}
	}
	parsers := baseParsers()
	for _, o := range opts {
		o(parsers)
	}
	var current string // the variable being parsed (OnSet runs just before its parser)
	funcs := map[reflect.Type]env.ParserFunc{}
	for t, p := range parsers {
		funcs[t] = func(s string) (any, error) {
			v, err := p(s)
			if err != nil {
				return nil, &varError{name: current, err: err}
			}
			return v, nil
		}
	}
	onSet := func(name string, _ any, _ bool) { current = name }
	// The defaults first, so that a field whose variable does not parse
	// keeps its default; the errors (required variables) come again below.
	_ = env.ParseWithOptions(cfg, env.Options{Environment: map[string]string{}, FuncMap: funcs, OnSet: onSet})
	return translate(env.ParseWithOptions(cfg, env.Options{Environment: environ, FuncMap: funcs, OnSet: onSet}))
}

// translate turns caarlos0/env's errors into ours: each names its
// variable, none shows a file's path or a secret.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	var out []error
	for _, e := range agg.Errors {
		var (
			ve      *varError
			pe      env.ParseError
			notSet  env.VarIsNotSetError
			load    env.LoadFileContentError
			pathErr *fs.PathError
		)
		switch {
		case errors.As(e, &pe):
			if errors.As(pe.Err, &ve) {
				out = append(out, ve)
			} else {
				out = append(out, fmt.Errorf("%s: %w", pe.Name, pe.Err))
			}
		case errors.As(e, &notSet):
			out = append(out, fmt.Errorf("%s is required", notSet.Key))
		case errors.As(e, &load):
			cause := load.Err
			if errors.As(cause, &pathErr) {
				cause = pathErr.Err
			}
			out = append(out, fmt.Errorf("%s: cannot read the file: %w", load.Key, cause))
		default:
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}

// Join returns the problems among errs as one configuration error, or nil.
func Join(errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return nil
}

// Vars lists the variables cfg (a struct or a pointer to one) declares, in
// declaration order, with their defaults. A declaration error (a variable
// without help, or with two defaults) is Parse's to report: the service
// does not start.
func Vars(cfg any) []Var {
	vars, _ := walk(cfg)
	for i := range vars {
		vars[i].value = reflect.Value{}
	}
	return vars
}

// walk reads the declaration of cfg.
func walk(cfg any) ([]Var, error) {
	v := reflect.ValueOf(cfg)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("envconfig: %T is not a struct", cfg)
	}
	var vars []Var
	var errs []error
	var visit func(v reflect.Value)
	visit = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, ok := f.Tag.Lookup("env")
			name, options, _ := strings.Cut(tag, ",")
			if !ok || name == "" {
				if fv.Kind() == reflect.Struct && tag != "-" {
					visit(fv)
				}
				continue
			}
			if name == "-" {
				continue
			}
			d := Var{Name: name, Help: f.Tag.Get("help"), keepRaw: f.Tag.Get("trim") == "false", value: fv}
			for o := range strings.SplitSeq(options, ",") {
				if o == "required" {
					d.Required = true
				}
			}
			switch s := f.Tag.Get("secret"); s {
			case "":
			case "true":
				d.Secret, d.mask = true, func(string) string { return "***" }
			case "url":
				d.Secret, d.mask = true, RedactDSN
			case "endpoint":
				d.Secret, d.mask = true, RedactURL
			default:
				errs = append(errs, fmt.Errorf("envconfig: %s: secret:%q is neither true, url nor endpoint", name, s))
			}
			if d.Help == "" {
				errs = append(errs, fmt.Errorf("envconfig: %s has no help tag", name))
			}
			if def, ok := f.Tag.Lookup("envDefault"); ok {
				d.Default, d.tagged = def, true
			} else if !fv.IsZero() {
				d.Default = format(fv)
			}
			if d.mask != nil && d.Default != "" {
				d.Default = d.mask(d.Default)
			}
			vars = append(vars, d)
		}
	}
	visit(v)
	return vars, errors.Join(errs...)
}

// format renders a value as an operator would write it.
func format(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Duration:
		return shortDuration(x)
	case []string:
		return strings.Join(x, ",")
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v.Interface())
}

// shortDuration is d as written in a configuration: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// LogValue is the effective configuration of cfg (a struct or a pointer to
// one), one attribute per variable, secrets masked: for the one
// "configuration" line a service logs at start.
func LogValue(cfg any) slog.Value {
	vars, err := walk(cfg)
	if err != nil {
		return slog.StringValue(err.Error())
	}
	attrs := make([]slog.Attr, 0, len(vars))
	for _, v := range vars {
		s := format(v.value)
		if v.mask != nil && s != "" {
			s = v.mask(s)
		}
		attrs = append(attrs, slog.String(v.Name, s))
	}
	return slog.GroupValue(attrs...)
}

// Usage writes vars as a table: name, default, description.
func Usage(w io.Writer, vars []Var) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, v := range vars {
		def := v.Default
		switch {
		case v.Required && def == "":
			def = "(required)"
		case def == "":
			def = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, def, v.Help)
	}
	return tw.Flush()
}
