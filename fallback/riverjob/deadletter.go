package riverjob

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// DeadLetter is a job that will not run again unless it is replayed: River
// discarded it after its last attempt, or the worker cancelled it because
// no attempt could succeed (a fail-closed class, invalid output on every
// tier).
type DeadLetter struct {
	// Job is River's row: its id, kind, state ("discarded" or
	// "cancelled"), attempts, errors and args.
	Job *rivertype.JobRow
	// Report is the last report the worker recorded, and HasReport says
	// whether it recorded one: a job cancelled from outside
	// (Client.JobCancel) has none. Report.Attempt says which attempt it
	// describes: a job that River's rescuer discarded after its worker
	// died on the last attempt carries an earlier attempt's report, if
	// any (its Job.Errors end with the rescuer's).
	Report    Report
	HasReport bool
}

// deadLetterPage is how many rows DeadLetters reads per query.
const deadLetterPage = 100

// DeadLetters lists the dead letters of the given job kinds (every kind
// when none is given), oldest first, a page at a time. Replay one with
// client.JobRetry(ctx, dl.Job.ID): River makes it available at once (and
// grants one more attempt to a job that used up its attempts). Fix what
// made it fail first: an unchanged input that failed closed fails closed
// again.
//
//	for dl, err := range riverjob.DeadLetters(ctx, client, ExtractArgs{}.Kind()) {
//		if err != nil {
//			return err
//		}
//		log.Printf("job %d: %s", dl.Job.ID, dl.Report)
//	}
func DeadLetters[TTx any](ctx context.Context, client *river.Client[TTx], kinds ...string) iter.Seq2[DeadLetter, error] {
	return func(yield func(DeadLetter, error) bool) {
		params := river.NewJobListParams().
			States(rivertype.JobStateDiscarded, rivertype.JobStateCancelled).
			OrderBy(river.JobListOrderByID, river.SortOrderAsc).
			First(deadLetterPage)
		if len(kinds) > 0 {
			params = params.Kinds(kinds...)
		}
		for {
			res, err := client.JobList(ctx, params)
			if err != nil {
				yield(DeadLetter{}, err)
				return
			}
			for _, job := range res.Jobs {
				dl := DeadLetter{Job: job}
				if out := job.Output(); len(out) > 0 {
					dl.HasReport = json.Unmarshal(out, &dl.Report) == nil && dl.Report.Outcome != 0
				}
				if !yield(dl, nil) {
					return
				}
			}
			if len(res.Jobs) < deadLetterPage {
				return
			}
			params = params.After(res.LastCursor)
		}
	}
}
