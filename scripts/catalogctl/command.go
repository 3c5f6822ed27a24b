package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"

	"golang.org/x/term"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// Environment variables the tool reads.
const (
	apiVar        = "CATALOG_API"
	tokenVar      = "CATALOG_TOKEN"
	adminTokenVar = "CATALOG_ADMIN_TOKEN"
	defaultAPI    = "http://127.0.0.1:8080"
)

// TokenKind is the token a command sends.
type TokenKind int

const (
	// NoToken: public routes only.
	NoToken TokenKind = iota
	// RetailerToken: --token, else $CATALOG_TOKEN, else $CATALOG_ADMIN_TOKEN.
	RetailerToken
	// AdminToken: --token, else $CATALOG_ADMIN_TOKEN.
	AdminToken
)

// tokenVars are where each kind of token is looked for after --token, in order.
var tokenVars = map[TokenKind][]string{
	RetailerToken: {tokenVar, adminTokenVar}, // the admin may act for any retailer
	AdminToken:    {adminTokenVar},
}

// Runner runs a command with its positional arguments, its flags parsed.
type Runner func(ctx context.Context, c *Call, args []string) error

// Command is one subcommand of the tool.
type Command struct {
	Name    string    // as typed: "upload"
	Args    string    // what follows the flags in the usage line: "--retailer R FILE"
	Summary string    // one line in the tool's usage
	Help    string    // the rest of `catalogctl <name> -h`
	Token   TokenKind // the token the tool finds before Run is called
	// Flags declares the command's own flags on fs and returns the function
	// that runs it. It is called once per run, before parsing.
	Flags func(fs *flag.FlagSet) Runner
}

// commands holds every registered command by name.
var commands = map[string]*Command{}

// register adds a command; each command's file calls it from init.
func register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("catalogctl: command " + c.Name + " registered twice")
	}
	if c.Flags == nil {
		panic("catalogctl: command " + c.Name + " has no Flags function")
	}
	commands[c.Name] = c
}

// Env is what the tool takes from its surroundings; tests replace it.
type Env struct {
	Getenv         func(string) string
	Stdout, Stderr io.Writer
	// Terminal: Stderr is a terminal, so progress bars redraw in place;
	// otherwise progress is written as plain lines.
	Terminal bool
}

func osEnv() Env {
	return Env{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr, Terminal: term.IsTerminal(int(os.Stderr.Fd()))}
}

// Call is one run of a command: the API client, the token and the outputs.
type Call struct {
	API    *apiclient.Client
	APIURL string // the API's base URL, for messages
	// Token is the bearer token the command's TokenKind asked for ("" for NoToken).
	Token          string
	Stdout, Stderr io.Writer
	Terminal       bool
	Env            Env
	cmd            *Command
	tokenSource    string // where Token came from, for messages
}

// globals are the flags accepted before and after the command name.
type globals struct {
	api, token string
}

func (g *globals) declare(fs *flag.FlagSet) {
	fs.StringVar(&g.api, "api", g.api, "the API's base URL (default $"+apiVar+", else "+defaultAPI+")")
	fs.StringVar(&g.token, "token", g.token, "bearer token (default $"+tokenVar+" for retailer commands, $"+adminTokenVar+" for admin commands)")
}

// usageError is bad usage of a command.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Usagef reports bad usage of the running command: its message and a pointer
// to -h, exit 1.
func (c *Call) Usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// exitError ends the tool with a code of the command's own.
type exitError struct {
	code int
	err  error // printed when not nil
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// Exit ends the tool with code, printing err when it is not nil.
func Exit(code int, err error) error { return exitError{code: code, err: err} }

// run is the whole tool: it returns the exit code.
func run(ctx context.Context, args []string, env Env) int {
	var g globals
	top := flag.NewFlagSet("catalogctl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	top.Usage = func() {}
	g.declare(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			toolUsage(env.Stdout)
			return 0
		}
		fmt.Fprintf(env.Stderr, "catalogctl: %v\nrun 'catalogctl -h' for usage\n", err)
		return 1
	}
	rest := top.Args()
	if len(rest) == 0 {
		toolUsage(env.Stderr)
		return 1
	}
	name := rest[0]
	if name == "help" {
		if len(rest) > 1 && commands[rest[1]] != nil {
			commandUsage(env.Stdout, commands[rest[1]])
		} else {
			toolUsage(env.Stdout)
		}
		return 0
	}
	cmd := commands[name]
	if cmd == nil {
		fmt.Fprintf(env.Stderr, "catalogctl: unknown command %q\nrun 'catalogctl -h' for the commands\n", name)
		return 1
	}

	own := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	runner := cmd.Flags(own)
	fs := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	own.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	g.declare(fs)
	positional, err := parseInterspersed(fs, rest[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(env.Stdout, cmd)
			return 0
		}
		fmt.Fprintf(env.Stderr, "catalogctl %s: %v\nrun 'catalogctl %s -h' for usage\n", cmd.Name, err, cmd.Name)
		return 1
	}

	c, err := newCall(cmd, g, env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "catalogctl %s: %v\n", cmd.Name, err)
		return 1
	}
	return c.report(ctx, runner(ctx, c, positional))
}

// newCall resolves the API address and the token the command needs.
func newCall(cmd *Command, g globals, env Env) (*Call, error) {
	raw := firstSet(g.api, env.Getenv(apiVar), defaultAPI)
	base, err := normalizeAPI(raw)
	if err != nil {
		return nil, err
	}
	c := &Call{API: apiclient.New(base), APIURL: base, Stdout: env.Stdout, Stderr: env.Stderr,
		Terminal: env.Terminal, Env: env, cmd: cmd}
	if cmd.Token == NoToken {
		return c, nil
	}
	c.Token, c.tokenSource = g.token, "--token"
	for _, name := range tokenVars[cmd.Token] {
		if c.Token != "" {
			break
		}
		c.Token, c.tokenSource = env.Getenv(name), "$"+name
	}
	if c.Token == "" && cmd.Token == AdminToken {
		return nil, fmt.Errorf("no admin token: pass --token or set %s "+
			"(`go run ./scripts/local up` prints it; on AWS it is in the secret of the stack output AdminTokenSecretArn)", adminTokenVar)
	}
	if c.Token == "" {
		return nil, fmt.Errorf("no token: pass --token or set %s to the retailer's token "+
			"(shown once when the retailer is onboarded: `catalogctl onboard R` with the admin token)", tokenVar)
	}
	return c, nil
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// normalizeAPI turns "127.0.0.1:8080" or "http://host/" into a base URL.
func normalizeAPI(raw string) (string, error) {
	s := strings.TrimRight(raw, "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return "", fmt.Errorf("API address %q is not a URL like %s (--api or $%s)", raw, defaultAPI, apiVar)
	}
	return s, nil
}

// parseInterspersed parses flags mixed with positional arguments ("upload
// FILE --retailer R"); everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// report prints what went wrong, in the user's terms, and returns the exit code.
func (c *Call) report(ctx context.Context, err error) int {
	if err == nil {
		return 0
	}
	name := "catalogctl " + c.cmd.Name
	var usage usageError
	var exit exitError
	var apiErr *apiclient.APIError
	var urlErr *url.Error
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(c.Stderr, "%s: %s\nusage: %s\nrun '%s -h' for details\n", name, usage.msg, usageLine(c.cmd), name)
		return 1
	case errors.As(err, &exit):
		if exit.err != nil {
			fmt.Fprintf(c.Stderr, "%s: %s\n", name, c.explain(ctx, exit.err))
		}
		return exit.code
	case errors.As(err, &apiErr) || errors.As(err, &urlErr) || ctx.Err() != nil:
		fmt.Fprintf(c.Stderr, "%s: %s\n", name, c.explain(ctx, err))
		return 1
	default:
		fmt.Fprintf(c.Stderr, "%s: %v\n", name, err)
		return 1
	}
}

// explain says what an error means for the user and what to do about it.
func (c *Call) explain(ctx context.Context, err error) string {
	var apiErr *apiclient.APIError
	var urlErr *url.Error
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Sprintf("interrupted (%v)", err)
	case errors.As(err, &apiErr) && apiErr.Status == 401:
		return fmt.Sprintf("the API at %s refused the token from %s (%v); check the token, or get a new one (a retailer's token stops working when it is replaced)",
			c.APIURL, c.tokenSource, apiErr)
	case errors.As(err, &apiErr) && apiErr.Status == 403:
		if c.cmd.Token == AdminToken {
			return fmt.Sprintf("the token from %s is not the admin token (%v); set %s or pass --token", c.tokenSource, apiErr, adminTokenVar)
		}
		return fmt.Sprintf("the token from %s is not this retailer's (%v)", c.tokenSource, apiErr)
	case errors.As(err, &urlErr) && strings.HasPrefix(urlErr.URL, c.APIURL):
		return fmt.Sprintf("cannot reach the catalog API at %s: %v\n"+
			"Is it running? Start the local stack with `go run ./scripts/local up`, "+
			"or point --api (or $%s) at the API's address.", c.APIURL, urlErr.Err, apiVar)
	}
	return err.Error()
}

func usageLine(cmd *Command) string {
	line := "catalogctl " + cmd.Name + " [flags]"
	if cmd.Args != "" {
		line += " " + cmd.Args
	}
	return line
}

// toolUsage lists every command.
func toolUsage(w io.Writer) {
	fmt.Fprintf(w, `catalogctl: the command line of the retailer catalog, a client of its HTTP API

usage: catalogctl [--api URL] [--token T] <command> [flags] [args]
       catalogctl <command> -h    one command's usage

commands:
`)
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-12s %s\n", name, commands[name].Summary)
	}
	fmt.Fprintf(w, `
global flags (before or after the command):
  --api URL    the API's base URL (default $%s, else %s)
  --token T    bearer token (default: $%s for retailer commands, falling back to
               $%s; $%s for admin commands)

exit codes: 0 success, 1 failure; commands that wait for an upload also
exit 2 rejected and 3 held.
`, apiVar, defaultAPI, tokenVar, adminTokenVar, adminTokenVar)
}

// commandUsage is `catalogctl <name> -h`.
func commandUsage(w io.Writer, cmd *Command) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", usageLine(cmd), cmd.Summary)
	if cmd.Help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cmd.Help))
	}
	own := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	cmd.Flags(own)
	var flags []*flag.Flag
	own.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	if len(flags) > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		for _, f := range flags {
			printFlag(w, f)
		}
	}
	switch cmd.Token {
	case RetailerToken:
		fmt.Fprintf(w, "\ntoken: the retailer's (--token, else $%s, else $%s)\n", tokenVar, adminTokenVar)
	case AdminToken:
		fmt.Fprintf(w, "\ntoken: the admin token (--token, else $%s)\n", adminTokenVar)
	}
	fmt.Fprintf(w, "API: --api, else $%s, else %s\n", apiVar, defaultAPI)
}

// printFlag prints one flag like flag.PrintDefaults, with two dashes.
func printFlag(w io.Writer, f *flag.Flag) {
	kind, usage := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if kind != "" {
		line += " " + kind
	}
	fmt.Fprintf(w, "%s\n      %s", line, strings.ReplaceAll(usage, "\n", "\n      "))
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
		fmt.Fprintf(w, " (default %s)", f.DefValue)
	}
	fmt.Fprintln(w)
}
