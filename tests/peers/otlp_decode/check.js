#!/usr/bin/env node
// An independent check of `ferry trace otlp` output: node check.js FILE.jsonl
//
// Each line is decoded as an opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest by protobufjs,
// with the OTLP v1.0.0 protos as the OpenTelemetry JS project compiled them (shipped in
// @opentelemetry/otlp-proto-exporter-base), then encoded to binary protobuf, decoded again and compared
// with the line: a field protobufjs does not know (a misspelt name), a value of the wrong type or an id
// that is not hex fails the round trip. It also checks what OTLP/JSON asks beyond proto3's JSON mapping:
// ids as lowercase hex (16 and 8 bytes, never all zero), 64-bit integers as decimal strings.
//
// Prints one JSON object: lines, span_count, unresolved_parents (parentSpanIds with no span of that trace
// in the file), duplicate_span_ids, problems, and spans: [{name, spanId, parentSpanId, traceId, service,
// status, kind, level (the ferry.task_level attribute)}], each read from the decoded message. Exits 0 when
// there is no problem, 1 otherwise.
'use strict';

const fs = require('fs');
const root = require('@opentelemetry/otlp-proto-exporter-base/build/src/generated/root');

const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const ID_DIGITS = { traceId: 32, spanId: 16, parentSpanId: 16 };

function checkId(holder, key, where, problems, required) {
  const value = holder[key];
  if (value === undefined || value === '') {
    if (required) problems.push(`${where}: no ${key}`);
    return;
  }
  if (typeof value !== 'string' || value.length !== ID_DIGITS[key] || !/^[0-9a-f]+$/.test(value)) {
    problems.push(`${where}: ${key} ${JSON.stringify(value)} is not ${ID_DIGITS[key]} lowercase hex digits`);
  } else if (/^0+$/.test(value)) {
    problems.push(`${where}: ${key} is all zero`);
  }
}

// OTLP/JSON writes ids as hex; protobufjs, following proto3's JSON mapping, reads bytes as base64.
function idsToBytes(holder) {
  for (const key of Object.keys(ID_DIGITS)) {
    if (typeof holder[key] === 'string') holder[key] = Buffer.from(holder[key], 'hex');
  }
}

function idsToHex(holder) {
  for (const key of Object.keys(ID_DIGITS)) {
    if (holder[key] instanceof Uint8Array) holder[key] = Buffer.from(holder[key]).toString('hex');
  }
}

function eachSpan(request, visit) {
  for (const rs of request.resourceSpans || []) {
    for (const ss of rs.scopeSpans || []) {
      for (const span of ss.spans || []) visit(span, rs);
    }
  }
}

// 64-bit integers in OTLP/JSON are decimal strings: times anywhere, intValue in any AnyValue.
function checkIntegers(value, where, problems) {
  if (Array.isArray(value)) {
    value.forEach((item, i) => checkIntegers(item, `${where}[${i}]`, problems));
    return;
  }
  if (value === null || typeof value !== 'object') return;
  for (const [key, item] of Object.entries(value)) {
    const wide = key === 'intValue' || key.endsWith('UnixNano');
    if (wide && !(typeof item === 'string' && /^-?[0-9]+$/.test(item))) {
      problems.push(`${where}.${key}: ${JSON.stringify(item)} is not a decimal string`);
    }
    checkIntegers(item, `${where}.${key}`, problems);
  }
}

// Empty repeated fields are the same as absent ones in protobuf.
function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const key of Object.keys(value).sort()) {
    const item = value[key];
    if (Array.isArray(item) && item.length === 0) continue;
    out[key] = canonical(item);
  }
  return out;
}

function firstDifference(a, b, where) {
  if (typeof a !== typeof b || Array.isArray(a) !== Array.isArray(b) || (a === null) !== (b === null)) {
    return `${where}: ${JSON.stringify(a)} became ${JSON.stringify(b)}`;
  }
  if (a === null || typeof a !== 'object') {
    return Object.is(a, b) ? null : `${where}: ${JSON.stringify(a)} became ${JSON.stringify(b)}`;
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    const d = firstDifference(a[key], b[key], `${where}.${key}`);
    if (d) return d;
  }
  return null;
}

function serviceOf(resourceSpans) {
  const attributes = (resourceSpans.resource && resourceSpans.resource.attributes) || [];
  const found = attributes.find((a) => a.key === 'service.name');
  return found && found.value ? found.value.stringValue : undefined;
}

function stringAttribute(span, key) {
  const found = (span.attributes || []).find((a) => a.key === key);
  return found && found.value ? found.value.stringValue : undefined;
}

function main() {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node check.js FILE.jsonl\n');
    process.exit(2);
  }
  const problems = [];
  const spans = [];
  let lines = 0;
  fs.readFileSync(file, 'utf8').split('\n').forEach((text, index) => {
    if (text === '') return;
    lines += 1;
    const where = `line ${index + 1}`;
    let input;
    try {
      input = JSON.parse(text);
    } catch (e) {
      problems.push(`${where}: not JSON (${e.message})`);
      return;
    }
    if (!Array.isArray(input.resourceSpans)) problems.push(`${where}: no resourceSpans`);
    checkIntegers(input, where, problems);
    const prepared = JSON.parse(text);
    eachSpan(input, (span, rs) => {
      const at = `${where}: span ${JSON.stringify(span.name)}`;
      checkId(span, 'traceId', at, problems, true);
      checkId(span, 'spanId', at, problems, true);
      checkId(span, 'parentSpanId', at, problems, false);
      for (const link of span.links || []) {
        checkId(link, 'traceId', `${at} link`, problems, true);
        checkId(link, 'spanId', `${at} link`, problems, true);
      }
    });
    eachSpan(prepared, (span) => {
      idsToBytes(span);
      for (const link of span.links || []) idsToBytes(link);
    });

    let decoded;
    try {
      const bytes = Request.encode(Request.fromObject(prepared)).finish();
      decoded = Request.decode(bytes);
    } catch (e) {
      problems.push(`${where}: protobuf round trip failed (${e.message})`);
      return;
    }
    const back = Request.toObject(decoded, { longs: String, enums: Number, json: true });
    eachSpan(back, (span) => {
      idsToHex(span);
      for (const link of span.links || []) idsToHex(link);
    });
    const difference = firstDifference(canonical(input), canonical(back), where);
    if (difference) problems.push(`not kept by the protobuf round trip: ${difference}`);

    eachSpan(back, (span, rs) => {
      spans.push({
        name: span.name,
        traceId: span.traceId || '',
        spanId: span.spanId || '',
        parentSpanId: span.parentSpanId || '',
        service: serviceOf(rs),
        status: span.status && span.status.code !== undefined ? span.status.code : 0,
        kind: span.kind || 0,
        level: stringAttribute(span, 'ferry.task_level'),
      });
    });
  });

  const ids = new Set();
  let duplicates = 0;
  for (const s of spans) {
    const key = `${s.traceId}/${s.spanId}`;
    if (ids.has(key)) duplicates += 1;
    ids.add(key);
  }
  const unresolved = spans.filter((s) => s.parentSpanId && !ids.has(`${s.traceId}/${s.parentSpanId}`)).length;
  const summary = {
    lines,
    span_count: spans.length,
    unresolved_parents: unresolved,
    duplicate_span_ids: duplicates,
    problems,
    spans,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  process.exit(problems.length === 0 ? 0 : 1);
}

main();
