// Package platform is what every service's main needs before its own code:
// configuration from environment variables, the logger, and the Base that
// opens the database, applies migrations, builds the Kafka producer, the
// outbox and its relay, the HTTP router with health and metrics, and runs
// them with an orderly shutdown.
package platform

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/paysuite/payments/pkg/envconfig"
)

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
