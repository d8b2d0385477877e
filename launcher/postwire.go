package launcher

import (
	"io"
	"os"

	"rtrace/postproc"
	"rtrace/resolver"
)

// postFunc returns the post-processor the pre-processor pipes a stream
// into for -P OPTS (sp-rtrace-postproc's options, "-l -c -r").
func postFunc(opts string) (func(io.Reader, io.Writer) error, error) {
	o, err := postproc.ParseOptionString(opts)
	if err != nil {
		return nil, err
	}
	return func(in io.Reader, out io.Writer) error {
		p := o // one per stream: the pre-processor runs one per process
		res := resolver.New(resolver.Options{Warn: os.Stderr})
		if p.Resolve {
			p.Resolver = res
		}
		p.Callees = res // open64 called, open64 shown
		return postproc.Text(in, out, p)
	}, nil
}
