package main

import (
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// writeFinalError writes herd's last line, the error it exits with: "herd:
// TEXT" in text, or with --log-format json (or HERD_LOG_FORMAT=json) one
// JSON object like the log's lines, so that a log collector reads it:
//
//	{"time":"...","level":"ERROR","msg":"herd exits with an error","error":"TEXT","exit_code":2}
func writeFinalError(w io.Writer, json bool, text string, code int) {
	if !json {
		io.WriteString(w, "herd: "+text+"\n")
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Error("herd exits with an error", "error", text, "exit_code", code)
}

// jsonLogs reports whether cmd (nil if the command line did not parse)
// logs in JSON: --log-format json, or HERD_LOG_FORMAT=json when the flag
// was not given (the variable may not have been applied yet if the flags
// did not parse).
func jsonLogs(cmd *cobra.Command, environ []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("log-format"); f != nil && f.Changed {
			return strings.EqualFold(f.Value.String(), "json")
		}
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, envName("log-format")+"="); ok {
			return strings.EqualFold(v, "json")
		}
	}
	return false
}
