// bulkhead JavaScript runner: started by the session agent as `node -e`, with
// fds 1 and 2 on the agent's pipes and the control socket on BH_CTL_FD.
// Cells run through V8's REPL mode (the inspector's Runtime.evaluate with
// replMode), as a devtools console does: a later cell may declare the same
// let/const/class again, top-level await works, and the completion value of
// the cell is its result, shown with util.inspect.
'use strict';
const inspector = require('inspector');
const net = require('net');
const util = require('util');

const session = new inspector.Session();
session.connect();
const hidden = (name, value) =>
    Object.defineProperty(globalThis, name, {value, writable: true, configurable: true, enumerable: false});
hidden('require', require);
hidden('__bh_inspect', (v) => util.inspect(v, {depth: 4, maxArrayLength: 200, maxStringLength: 100000}));

process.on('uncaughtException', (e) => {
    try { process.stderr.write(((e && e.stack) || String(e)) + '\n'); } catch (_) {}
});
process.on('unhandledRejection', (e) => {
    try { process.stderr.write('Unhandled rejection: ' + ((e && e.stack) || String(e)) + '\n'); } catch (_) {}
});

function post(method, params) {
    return new Promise((resolve, reject) =>
        session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));
}

function cleanStack(text) {
    // the cell's own frames, not the runner's or node's internals
    return text.split('\n').filter((l) => !/^\s+at .*(\(node:|\[eval\]|new Promise \(<anonymous>\))/.test(l) && !/^\s+at node:/.test(l)).join('\n');
}

async function show(obj) {
    if (obj.objectId) {
        try {
            const r = await post('Runtime.callFunctionOn', {
                objectId: obj.objectId,
                functionDeclaration: 'function () { return globalThis.__bh_inspect(this); }',
                returnByValue: true,
            });
            return String(r.result.value);
        } finally {
            post('Runtime.releaseObject', {objectId: obj.objectId}).catch(() => {});
        }
    }
    if ('unserializableValue' in obj) return String(obj.unserializableValue);
    if ('value' in obj) return util.inspect(obj.value);
    return String(obj.description);
}

async function runCell(code) {
    const r = await post('Runtime.evaluate', {expression: code, replMode: true, awaitPromise: true});
    if (r.exceptionDetails) {
        const ex = r.exceptionDetails.exception;
        let text;
        if (ex && ex.subtype === 'error') text = cleanStack(String(ex.description));
        else if (ex) text = 'Uncaught ' + (await show(ex));
        else text = String(r.exceptionDetails.text);
        process.stderr.write(text + '\n');
        return {exit: 1};
    }
    const res = r.result;
    if (!res || res.type === 'undefined') return {exit: 0};
    const value = await show(res);
    process.stdout.write(value + '\n');
    return {exit: 0, has_value: true, value};
}

const ctl = new net.Socket({fd: Number(process.env.BH_CTL_FD || 3), readable: true, writable: true});
delete process.env.BH_CTL_FD;
let buf = Buffer.alloc(0);
let busy = false;
async function pump() {
    if (busy) return;
    busy = true;
    while (buf.length >= 4) {
        const n = buf.readUInt32BE(0);
        if (buf.length < 4 + n) break;
        const req = JSON.parse(buf.subarray(4, 4 + n).toString('utf8'));
        buf = buf.subarray(4 + n);
        let reply;
        try {
            reply = await runCell(String(req.code || ''));
        } catch (e) {
            process.stderr.write(String((e && e.stack) || e) + '\n');
            reply = {exit: 1};
        }
        const data = Buffer.from(JSON.stringify(reply));
        const hdr = Buffer.alloc(4);
        hdr.writeUInt32BE(data.length, 0);
        ctl.write(Buffer.concat([hdr, data]));
    }
    busy = false;
}
ctl.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    pump();
});
ctl.on('end', () => process.exit(0));
ctl.on('error', () => process.exit(0));
