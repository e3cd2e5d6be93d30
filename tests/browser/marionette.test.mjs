// The harness's Marionette client (harness/marionette.mjs) against a stand-in for Firefox: a
// connection that ends before or after the hello rejects what waits on it, and nothing throws
// inside the socket's handlers.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { marionette } from './harness/marionette.mjs';

const message = (value) => {
  const json = Buffer.from(JSON.stringify(value));
  return Buffer.concat([Buffer.from(`${json.length}:`), json]);
};

// A server that hands each connection to `onConnection`; returns its port and close().
async function standIn(onConnection) {
  const server = createServer(onConnection);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: server.address().port, close: () => new Promise((resolve) => server.close(resolve)) };
}

test('a connection that Firefox closes before its hello rejects the connect, with nothing uncaught', { timeout: 5000 }, async () => {
  const uncaught = [];
  const onUncaught = (error) => uncaught.push(error);
  process.on('uncaughtException', onUncaught);
  const firefox = await standIn((socket) => socket.end());
  try {
    await assert.rejects(marionette(firefox.port), /Firefox closed its Marionette connection/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(uncaught, []);
  } finally {
    process.off('uncaughtException', onUncaught);
    await firefox.close();
  }
});

test('a command that Firefox leaves unanswered when it closes is rejected', async () => {
  const firefox = await standIn((socket) => {
    socket.write(message({ applicationType: 'gecko', marionetteProtocol: 3 }));
    socket.once('data', () => socket.end());
  });
  try {
    const session = await marionette(firefox.port);
    await assert.rejects(session.call('POST', '/session', { capabilities: { alwaysMatch: {} } }),
      /Firefox closed its Marionette connection/);
    await assert.rejects(session.call('GET', '/session/1/window'), /Firefox closed its Marionette connection/);
    session.close();
  } finally {
    await firefox.close();
  }
});
