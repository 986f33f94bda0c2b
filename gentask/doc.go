// Package gentask presents a generation as a task
// (io.modelcontextprotocol/tasks): Mirror keeps each generation's task row
// in step with it inside the generation's own transaction (the status
// mapping is the table taskStatus), GenTasks is the tasks package's kind
// for generation tasks (cancel, answers, results) and runs the spend
// approval for every client: as input_required for a Tasks client, by
// MRTR with an ApprovalToken, or by confirmSpend.
package gentask
