// Package gentask presents a generation as a task
// (io.modelcontextprotocol/tasks): the pieces the generation task kind
// needs beside the tasks package, starting with the approval token that
// carries a spend approval across multi round-trip requests.
package gentask
