package main

import (
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"

	"rtrace/launcher/ucli"
)

// getoptArgs reads the options of the verbs urfave/cli runs as getopt_long
// reads record's (launcher/ucli): clusters (-lc), values attached (-D2,
// -P-t) or not, unambiguous prefixes of long names, "--". It returns args
// with each verb option spelled --NAME or --NAME=VALUE, then "--" and the
// verb's words, which urfave/cli reads alike; args as they are when they
// name no verb of app. A mistake is one line naming the verb, with the
// closest option.
func getoptArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	global, rest, err := ucli.Getopt(opts(app.Flags), args[1:])
	if err != nil || len(rest) == 0 {
		return args, nil // urfave says what is wrong, or shows its help
	}
	cmd := app.Command(rest[0])
	if cmd == nil {
		return args, nil
	}
	stop := map[string]bool{}
	if cmd.Name == "sp-rtrace" {
		stop["execute"] = true // -x PROG: the words after it are PROG's
	}
	occ, words, err := ucli.Getopt(opts(cmd.Flags, stop), rest[1:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Name, err)
	}
	out := append(slices.Clip(args[:1]), spell(global)...)
	out = append(append(out, rest[0]), spell(occ)...)
	if len(words) > 0 {
		out = append(append(out, "--"), words...)
	}
	return out, nil
}

// opts are the options of flags for ucli.Getopt, with -h and --help; a
// flag whose long name is in stop ends the options.
func opts(flags []cli.Flag, stop ...map[string]bool) []ucli.Opt {
	out := []ucli.Opt{{Long: "help", Short: 'h'}}
	for _, f := range flags {
		arg := false
		if tv, ok := f.(interface{ TakesValue() bool }); ok {
			arg = tv.TakesValue()
		}
		_, isBool := f.(*cli.BoolFlag)
		o := ucli.Opt{Arg: arg, OptVal: isBool, EqShort: true}
		var longs []string
		for _, n := range f.Names() {
			if len(n) == 1 {
				o.Short = n[0]
			} else {
				longs = append(longs, n)
			}
		}
		if len(longs) == 0 {
			out = append(out, o)
			continue
		}
		for i, l := range longs {
			one := o
			one.Long = l
			one.Stop = len(stop) > 0 && stop[0][longs[0]]
			if i > 0 {
				one.Short = 0
			}
			out = append(out, one)
		}
	}
	return out
}

// spell writes options found back as urfave/cli reads them.
func spell(occ []ucli.Occurrence) []string {
	var out []string
	for _, o := range occ {
		name := o.Long
		if name == "" {
			name = string(o.Short)
		}
		if o.Arg || o.Valued {
			out = append(out, "--"+name+"="+o.Value)
		} else {
			out = append(out, "--"+name)
		}
	}
	return out
}
