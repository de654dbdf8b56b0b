// The page answer of `exportlens.graph` and the webview that frames it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cursorParams, pageCommandArgs, parsePageAnswer, pictureHtml } from '../../src/graphPicture';

const URL_OK = 'http://127.0.0.1:40123/AbC-_9xyz/0/';

test('parsePageAnswer takes the server\'s {title, url} on loopback only', () => {
    assert.deepEqual(parsePageAnswer({ title: 'Net: graph', url: URL_OK }), { title: 'Net: graph', url: URL_OK });
    assert.equal(parsePageAnswer({ title: 'x', url: 'http://example.com:80/t/0/' }), undefined);
    assert.equal(parsePageAnswer({ title: 'x', url: 'file:///etc/passwd' }), undefined);
    assert.equal(parsePageAnswer({ title: 'x', text: '# rows', links: [] }), undefined);
    assert.equal(parsePageAnswer(null), undefined);
});

test('pageCommandArgs asks for the page, with the target when one is chosen', () => {
    assert.deepEqual(pageCommandArgs('file:///m.py', null), [{ uri: 'file:///m.py', page: true }]);
    assert.deepEqual(pageCommandArgs('file:///m.py', 'Net'), [{ uri: 'file:///m.py', target: 'Net', page: true }]);
});

test('pictureHtml frames the page and allows only its origin', () => {
    const html = pictureHtml(URL_OK, 'Net "graph" <x>');
    assert.match(html, /<iframe src="http:\/\/127\.0\.0\.1:40123\/AbC-_9xyz\/0\/"/);
    assert.match(html, /frame-src http:\/\/127\.0\.0\.1:40123;/);
    assert.match(html, /default-src 'none'/);
    assert.ok(!html.includes('<x>') && html.includes('&quot;graph&quot;'));
    assert.ok(!html.includes('<script'));
});

test('cursorParams names a Python file on disk and its 0-based line', () => {
    assert.deepEqual(cursorParams('file:///w/net.py', 'file', 'python', 12), { uri: 'file:///w/net.py', line: 12 });
    assert.equal(cursorParams('untitled:Untitled-1', 'untitled', 'python', 3), undefined);
    assert.equal(cursorParams('file:///w/notes.md', 'file', 'markdown', 3), undefined);
    assert.equal(cursorParams('file:///w/net.py', 'file', 'python', -1), undefined);
});
