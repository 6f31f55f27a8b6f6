// compose-check loads a Compose file with compose-go, the loader Docker Compose itself uses: schema validation,
// anchors and merges, interpolation and dependency checks, with no Docker engine. Usage: compose-check FILE
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-check FILE")
		os.Exit(2)
	}
	file, _ := filepath.Abs(os.Args[1])
	options, err := cli.NewProjectOptions([]string{file}, cli.WithWorkingDirectory(filepath.Dir(file)), cli.WithOsEnv, cli.WithResolvedPaths(true))
	if err != nil {
		fail(err)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fail(err)
	}
	names := project.ServiceNames()
	sort.Strings(names)
	fmt.Printf("compose file %s is valid: project %q, %d services %v\n", os.Args[1], project.Name, len(names), names)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "compose file invalid: %v\n", err)
	os.Exit(1)
}
