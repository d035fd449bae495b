package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/trace"
)

// The Weave objects and calls of an evaluation, as the Weave Python SDK writes them for
// Evaluation.evaluate (its 0.54 layout): an Evaluation object {dataset, scorers, ...}; a
// Model object; one Evaluation.evaluate call (inputs self and model, output the summary)
// with, under it, an Evaluation.predict_and_score call per row (inputs self, model, example:
// the row's ref; output {output, scores, model_latency}) whose children are the model's
// predict call and one call per scorer, the scorers' results also as wandb.runnable.<scorer>
// feedback on the predict call, and an Evaluation.summarize call. Studio's evaluation pages
// and the SDK read them as they read the SDK's own.

// Op names of the calls Hone writes.
const (
	opEvaluate  = "Evaluation.evaluate"
	opPredScore = "Evaluation.predict_and_score"
	opSummarize = "Evaluation.summarize"
	opPredict   = "HoneChatModel.predict"
)

// opSource is the code saved with an op Hone runs itself: a stub that says where it runs.
func opSource(name string) string {
	fn := name[strings.LastIndex(name, ".")+1:]
	return fmt.Sprintf(`import weave


@weave.op(name=%q)
def %s(*args, **kwargs):
    """Hone runs this op on the server (POST /v1/preview/evaluation-jobs); it does not run here."""
    raise NotImplementedError("Hone runs %s on the server")
`, name, fn, name)
}

// publishOp saves an op (its code file and its object) in project and returns its ref.
func (s *Service) publishOp(ctx context.Context, project, name string) (string, error) {
	key := project + "\x00" + name
	if v, ok := s.ops.Load(key); ok {
		return v.(string), nil
	}
	f, err := s.Trace.FileCreate(ctx, project, "obj.py", []byte(opSource(name)), "")
	if err != nil {
		return "", err
	}
	val, _ := json.Marshal(map[string]any{"_type": "CustomWeaveType", "weave_type": map[string]string{"type": "Op"},
		"files": map[string]string{"obj.py": f.Digest}})
	ref, err := s.publish(ctx, project, name, "op", val)
	if err == nil {
		s.ops.Store(key, ref)
	}
	return ref, err
}

// publish saves an object version (the same value is the same version) and returns its ref.
func (s *Service) publish(ctx context.Context, project, name, kind string, val json.RawMessage) (string, error) {
	entity, _, _ := strings.Cut(project, "/")
	res, err := s.Trace.ObjCreate(ctx, trace.ObjCreateReq{Obj: trace.ObjSchemaForInsert{ProjectID: project, ObjectID: name, Val: val}}, entity)
	if err != nil {
		return "", err
	}
	return "weave:///" + project + "/" + kind + "/" + name + ":" + res.Digest, nil
}

// object is a Weave object's value in the SDK's field order.
type object struct {
	fields []kv
}

type kv struct {
	k string
	v any
}

func (o *object) add(k string, v any) *object { o.fields = append(o.fields, kv{k, v}); return o }

func (o *object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// scorerClass is the Weave class name of a built-in scorer.
func scorerClass(typ string) string {
	return map[string]string{ExactMatch: "ExactMatchScorer", Contains: "ContainsScorer", Regex: "RegexScorer",
		JSONSchema: "JSONSchemaScorer", Numeric: "NumericScorer", ToolCall: "ToolCallScorer", Judge: "JudgeScorer"}[typ]
}

// publishScorer saves a scorer as a Weave Scorer object (its settings as fields, its score
// op) and returns the object's and the op's refs.
func (s *Service) publishScorer(ctx context.Context, project string, sc Scorer) (objRef, opRef string, err error) {
	class := scorerClass(sc.Type)
	if opRef, err = s.publishOp(ctx, project, class+".score"); err != nil {
		return "", "", err
	}
	cfg, _ := json.Marshal(sc)
	var settings map[string]any
	json.Unmarshal(cfg, &settings)
	delete(settings, "name")
	o := (&object{}).add("_type", class).add("name", sc.Name).add("description", "Hone's built-in "+sc.Type+" scorer").
		add("column_map", nil).add("hone", settings).add("score", opRef).add("_class_name", class).
		add("_bases", []string{"Scorer", "Object", "BaseModel"})
	val, _ := json.Marshal(o)
	objRef, err = s.publish(ctx, project, sc.Name, "object", val)
	return objRef, opRef, err
}

// publishEvaluation saves the Evaluation object of spec (its dataset a Dataset ref with a
// digest) with its scorers and ops, and returns its ref.
func (s *Service) publishEvaluation(ctx context.Context, project string, spec Spec) (string, error) {
	var scorers []string
	for _, sc := range spec.Scorers {
		ref, _, err := s.publishScorer(ctx, project, sc)
		if err != nil {
			return "", err
		}
		scorers = append(scorers, ref)
	}
	ops := map[string]string{}
	for _, op := range []string{opEvaluate, opPredScore, opSummarize} {
		ref, err := s.publishOp(ctx, project, op)
		if err != nil {
			return "", err
		}
		ops[op] = ref
	}
	hone := spec
	hone.Dataset = ""
	o := (&object{}).add("_type", "Evaluation").add("name", spec.Name).
		add("description", fmt.Sprintf("Run by Hone on the server (POST /v1/preview/evaluation-jobs): %d scorer(s)", len(spec.Scorers))).
		add("dataset", spec.Dataset).add("scorers", scorers).add("preprocess_model_input", nil).add("trials", 1).
		add("metadata", map[string]any{"hone": hone}).add("evaluation_name", nil).
		add("evaluate", ops[opEvaluate]).add("predict_and_score", ops[opPredScore]).add("summarize", ops[opSummarize]).
		add("_class_name", "Evaluation").add("_bases", []string{"Object", "BaseModel"})
	val, err := json.Marshal(o)
	if err != nil {
		return "", err
	}
	return s.publish(ctx, project, spec.Name, "object", val)
}

// modelObjectID names a model's Weave object: its name with '/' and ':' as '-'.
func modelObjectID(name string) string {
	return strings.NewReplacer("/", "-", ":", "-", " ", "-").Replace(name)
}

// publishModel saves the Weave Model object of a target with its generation settings.
func (s *Service) publishModel(ctx context.Context, project string, t Target, g Generation) (string, error) {
	predict, err := s.publishOp(ctx, project, opPredict)
	if err != nil {
		return "", err
	}
	o := (&object{}).add("_type", "HoneChatModel").add("name", t.Name).
		add("description", "A model served by Hone, asked through its chat completions API").
		add("model", t.Name).add("base_model", t.BaseModel).add("checkpoint_step", t.Step).add("generation", g).
		add("predict", predict).add("_class_name", "HoneChatModel").add("_bases", []string{"Model", "Object", "BaseModel"})
	val, _ := json.Marshal(o)
	return s.publish(ctx, project, modelObjectID(t.Name), "object", val)
}

// callIDs name an evaluation run's calls: deterministic from the job and the run's label, so
// that a job that runs again finds the calls its earlier run wrote.
var callNamespace = uuid.MustParse("6f1c3c3e-8a4e-4b43-9f0e-686f6e657661") // "honeeva"

func runCallID(jobID, label string) (id, traceID string) {
	return uuid.NewSHA1(callNamespace, []byte(jobID+"/"+label+"/evaluate")).String(),
		uuid.NewSHA1(callNamespace, []byte(jobID+"/"+label+"/trace")).String()
}

// evalAttributes are the attributes of every call Hone writes for an evaluation.
func evalAttributes(jobID string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"weave": map[string]any{"source": "hone"}, "_weave_eval_meta": map[string]any{"declarative": true},
		"hone": map[string]any{"job_id": jobID}})
	return b
}

// callPair is a finished call: its start and end for one upsert batch.
func callPair(project, id, traceID, parentID, op, display string, started, ended time.Time, attrs, inputs json.RawMessage,
	output any, summary any, exception string) (trace.CallBatchItem, trace.CallBatchItem) {
	st := db.FormatTime(started)
	start := trace.StartedCallSchemaForInsert{ProjectID: project, ID: &id, TraceID: &traceID, OpName: op, StartedAt: st,
		Attributes: attrs, Inputs: inputs}
	if parentID != "" {
		p := parentID
		start.ParentID = &p
	}
	if display != "" {
		d := display
		start.DisplayName = &d
	}
	out, _ := json.Marshal(output)
	sum, _ := json.Marshal(summary)
	if summary == nil {
		sum = json.RawMessage(`{}`)
	}
	end := trace.EndedCallSchemaForInsert{ProjectID: project, ID: id, EndedAt: db.FormatTime(ended), Output: out, Summary: sum,
		TraceID: &traceID, StartedAtHint: &st}
	if exception != "" {
		e := exception
		end.Exception = &e
	}
	var a, b trace.CallBatchItem
	a.Mode, a.Req.Start = "start", &start
	b.Mode, b.Req.End = "end", &end
	return a, b
}

// newID is a new call id (UUIDv7, as the SDK's).
func newID() string { return uuid.Must(uuid.NewV7()).String() }
