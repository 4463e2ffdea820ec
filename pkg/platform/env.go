// Package platform is what every service's main needs before its own code:
// configuration from environment variables, the logger, and the Base that
// opens the database, applies migrations, builds the Kafka writer, the
// outbox and its relay, the HTTP router with health and metrics, and runs
// them with an orderly shutdown.
package platform

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/envconfig"
)

// Env reads typed configuration values and collects every problem, so that
// a bad configuration is reported whole, once, at start-up.
type Env struct {
	getenv func(string) string
	errs   []error
}

// NewEnv reads from getenv (os.Getenv in main, a map in tests).
func NewEnv(getenv func(string) string) *Env { return &Env{getenv: getenv} }

// String returns the variable or def when unset.
func (e *Env) String(name, def string) string {
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v
	}
	return def
}

// Required returns the variable and records an error when it is unset.
func (e *Env) Required(name string) string {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		e.errs = append(e.errs, fmt.Errorf("%s is required", name))
	}
	return v
}

// Int returns the variable as an integer, or def.
func (e *Env) Int(name string, def int) int {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not an integer", name, v))
		return def
	}
	return n
}

// Int64 returns the variable as a 64-bit integer, or def.
func (e *Env) Int64(name string, def int64) int64 {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not an integer", name, v))
		return def
	}
	return n
}

// Float64 returns the variable as a number, or def.
func (e *Env) Float64(name string, def float64) float64 {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not a number", name, v))
		return def
	}
	return f
}

// Duration returns the variable as a Go duration ("500ms", "30s"), or def.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not a duration", name, v))
		return def
	}
	return d
}

// Bool returns the variable as a boolean, or def.
func (e *Env) Bool(name string, def bool) bool {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not a boolean", name, v))
		return def
	}
	return b
}

// Check records err (when not nil) as a configuration problem.
func (e *Env) Check(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Err returns every problem found, joined, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(e.errs...))
}

// NewLogger returns a slog logger writing to w: JSON by default (containers),
// text when format is "text". level is debug, info, warn or error. Records
// logged with a context carry its request id and trace id.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", "json":
		return slog.New(contextHandler{slog.NewJSONHandler(w, opts)}), nil
	case "text":
		return slog.New(contextHandler{slog.NewTextHandler(w, opts)}), nil
	default:
		return nil, fmt.Errorf("LOG_FORMAT: %q is neither json nor text", format)
	}
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// LogConfig are the logging variables every binary reads.
type LogConfig struct {
	Format string `env:"LOG_FORMAT" help:"json or text (default: text on a terminal, json otherwise)"`
	Level  string `env:"LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
}

// LoggerFromEnv is NewLogger configured by LogConfig: LOG_FORMAT (default
// json, text when w is a terminal) and LOG_LEVEL (default info).
func LoggerFromEnv(getenv func(string) string, w io.Writer) (*slog.Logger, error) {
	var c LogConfig
	if err := envconfig.Parse(getenv, &c); err != nil {
		return nil, err
	}
	if f, ok := w.(*os.File); ok && c.Format == "" && IsTerminal(f) {
		c.Format = "text"
	}
	return NewLogger(w, c.Format, c.Level)
}
