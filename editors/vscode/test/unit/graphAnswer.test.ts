// The graph view's pure parts: the server's `exportlens.graph` answer, the link under a
// position, the command arguments from a code lens or the palette, the view's URI query.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
    GraphLink,
    graphCommandArgs,
    linkAt,
    parseGraphAnswer,
    parseViewQuery,
    queryFromArgs,
    uriArgument,
    viewName,
} from '../../src/graphAnswer';

const range = (line: number, start: number, end: number) => ({
    start: { line, character: start },
    end: { line, character: end },
});

const LINK: GraphLink = { line: 2, start: 40, end: 53, uri: 'file:///w/net.py', range: range(11, 8, 30) };

test('an answer keeps its title, text and well-formed links', () => {
    const answer = parseGraphAnswer({ title: 'Net', text: 'a\nb\nc', links: [LINK] });
    assert.deepEqual(answer, { title: 'Net', text: 'a\nb\nc', links: [LINK] });
});

test('a malformed link is dropped, the rest of the view stays', () => {
    const bad = [
        { ...LINK, uri: 7 },
        { ...LINK, line: -1 },
        { ...LINK, end: LINK.start }, // empty span
        { ...LINK, range: { start: { line: 1 } } },
        null,
    ];
    const answer = parseGraphAnswer({ title: 'Net', text: 'x', links: [...bad, LINK] });
    assert.ok(typeof answer !== 'string');
    assert.deepEqual(answer.links, [LINK]);
});

test('an answer without text is an error that says what came back', () => {
    assert.match(parseGraphAnswer(null) as string, /unexpected answer from exportlens\.graph: null/);
    assert.match(parseGraphAnswer('graph text') as string, /unexpected answer/);
    assert.match(parseGraphAnswer({ title: 'x', links: [] }) as string, /unexpected answer/);
});

test('the link under a position: its row and [start, end) columns', () => {
    const other: GraphLink = { ...LINK, line: 3 };
    assert.equal(linkAt([LINK, other], 2, 40), LINK);
    assert.equal(linkAt([LINK, other], 2, 52), LINK);
    assert.equal(linkAt([LINK, other], 2, 53), undefined); // end is exclusive
    assert.equal(linkAt([LINK, other], 2, 39), undefined);
    assert.equal(linkAt([LINK, other], 3, 45), other);
    assert.equal(linkAt([LINK, other], 4, 45), undefined);
});

test('the code lens argument {uri, target} and positional [uri, target] give the same query', () => {
    const fromLens = queryFromArgs([{ uri: 'file:///w/net.py', target: 'Net' }], undefined);
    const positional = queryFromArgs(['file:///w/net.py', 'Net'], undefined);
    assert.deepEqual(fromLens, { uri: 'file:///w/net.py', target: 'Net', line: null });
    assert.deepEqual(positional, fromLens);
    assert.deepEqual(queryFromArgs([{ uri: 'file:///w/net.py', line: 4 }], undefined), {
        uri: 'file:///w/net.py',
        target: null,
        line: 4,
    });
});

test('no arguments: the active file if any, else nothing to show', () => {
    assert.deepEqual(queryFromArgs([], 'file:///w/a.py'), { uri: 'file:///w/a.py', target: null, line: null });
    assert.equal(queryFromArgs([], undefined), undefined);
    // A menu passes the file's Uri: that file, not the active one.
    const fromMenu = { scheme: 'file', toString: () => 'file:///w/b.py' };
    assert.deepEqual(queryFromArgs([fromMenu], 'file:///w/a.py'), { uri: 'file:///w/b.py', target: null, line: null });
});

test('the command arguments name only what is set', () => {
    assert.deepEqual(graphCommandArgs({ uri: 'file:///w/a.py', target: null, line: null }), [{ uri: 'file:///w/a.py' }]);
    assert.deepEqual(graphCommandArgs({ uri: 'file:///w/a.py', target: 'Net', line: 0 }), [
        { uri: 'file:///w/a.py', target: 'Net', line: 0 },
    ]);
});

test('a view URI query round-trips, a hand-made one is refused', () => {
    const query = { uri: 'file:///w/a.py', target: 'Net', line: 9 };
    assert.deepEqual(parseViewQuery(JSON.stringify(query)), query);
    assert.equal(parseViewQuery('not json'), undefined);
    assert.equal(parseViewQuery('{"source": "file:///w/a.py"}'), undefined);
});

test('the tab names the file and the target, or the line (1-based) whose nodes it shows', () => {
    assert.equal(viewName('/w/a.py', { uri: '', target: null, line: null }), '/w/a.py (all targets).nodes');
    assert.equal(viewName('/w/a.py', { uri: '', target: 'Net', line: null }), '/w/a.py (Net).nodes');
    assert.equal(viewName('/w/a.py', { uri: '', target: null, line: 13 }), '/w/a.py:14.nodes');
});

test('the reexport lens passes [uri] as a string; a menu passes a Uri object', () => {
    assert.equal(uriArgument('file:///w/a.py'), 'file:///w/a.py');
    const fakeUri = { scheme: 'file', toString: () => 'file:///w/b.py' };
    assert.equal(uriArgument(fakeUri), 'file:///w/b.py');
    assert.equal(uriArgument(undefined), undefined);
    assert.equal(uriArgument(''), undefined);
    assert.equal(uriArgument({ uri: 'x' }), undefined);
});
