#!/usr/bin/env python3
"""Renders chat templates as transformers' apply_chat_template(tokenize=False) does, for the
parity test: the same Jinja environment (sandboxed, trim_blocks, lstrip_blocks, loop controls),
the same tojson (json.dumps, ensure_ascii off), raise_exception and strftime_now, and tools
and documents passed as None. strftime_now formats the date the case gives, so the test is
deterministic.

Usage: reference_render.py CASES.json OUT.json
CASES.json: [{"template": PATH, "messages": [...], "add_generation_prompt": bool,
              "bos_token": str, "eos_token": str, "variables": {...}, "date": [Y, M, D]}, ...]
OUT.json: one {"text": ...} or {"error": ...} per case.
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def environment(date):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime(*date).strftime(fmt)
    return env


def main():
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    results = []
    for case in cases:
        source = open(case["template"], encoding="utf-8").read()
        try:
            text = environment(case["date"]).from_string(source).render(
                messages=case["messages"], tools=None, documents=None,
                add_generation_prompt=case["add_generation_prompt"],
                bos_token=case["bos_token"], eos_token=case["eos_token"], **case["variables"])
            results.append({"text": text})
        except jinja2.exceptions.TemplateError as e:
            results.append({"error": str(e)})
    json.dump(results, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)


main()
