"""The mesh as the official Python A2A client (a2a-sdk, PyPI) sees it: each check one call of the stock client.

Usage: mesh_checks.py BASE_URL AGENT HEADER=VALUE... (the headers: the caller's credentials, sent with every request).
The agent is an echo agent registered on the mesh (test/support/a2a-echo-agent.ts): `echo:<text>` completes with
<text> as its artifact, `park` stays working. Prints one line per check (`PASS name` or `FAIL name: why`) and exits
1 when any failed. Run by test/integration/a2a-python-client.spec.ts with the venv of scripts/python-venv.sh.
"""

import asyncio
import sys
import traceback
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    TaskState,
)

BASE, AGENT = sys.argv[1], sys.argv[2]
HEADERS = dict(h.split('=', 1) for h in sys.argv[3:])
AGENT_URL = f'{BASE}/a2a/agents/{AGENT}'


def message(text, role=Role.ROLE_USER, skill=None):
    m = Message(message_id=str(uuid.uuid4()), role=role, parts=[Part(text=text)])
    if skill:
        m.metadata.update({'skillId': skill})
    return m


async def client_of(url, http, streaming=False):
    return await ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create_from_url(url)


async def last_task(client, request):
    """The task of the last of a send's answers (a task, or a stream's events with the task kept up to date)."""
    task = None
    async for answer in client.send_message(request):
        if answer.HasField('task'):
            task = answer.task
        elif answer.HasField('status_update'):
            task.status.CopyFrom(answer.status_update.status)
    return task


def artifact_texts(task):
    return [p.text for a in task.artifacts for p in a.parts]


async def expect_error(call, kind):
    try:
        await call()
    except kind:
        return
    raise AssertionError(f'expected {kind.__name__}')


async def main():
    results = []
    async with httpx.AsyncClient(headers=HEADERS, timeout=60) as http:
        client = await client_of(AGENT_URL, http)
        streaming = await client_of(AGENT_URL, http, streaming=True)
        sent = {}

        async def send():
            task = await last_task(client, SendMessageRequest(message=message('echo:from python')))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status.state
            assert artifact_texts(task) == ['from python'], artifact_texts(task)
            sent['id'] = task.id

        async def get():
            task = await client.get_task(GetTaskRequest(id=sent['id']))
            assert (task.id, task.status.state) == (sent['id'], TaskState.TASK_STATE_COMPLETED)

        async def list_tasks():
            listed = await client.list_tasks(ListTasksRequest(page_size=100))
            assert sent['id'] in [t.id for t in listed.tasks]

        async def cancel():
            parked = await last_task(
                client,
                SendMessageRequest(
                    message=message('park'), configuration=SendMessageConfiguration(return_immediately=True)
                ),
            )
            canceled = await client.cancel_task(CancelTaskRequest(id=parked.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled.status.state

        async def stream():
            states = []
            async for answer in streaming.send_message(SendMessageRequest(message=message('echo:streamed'))):
                if answer.HasField('status_update'):
                    states.append(answer.status_update.status.state)
                elif answer.HasField('task'):
                    states.append(answer.task.status.state)
            assert states[-1] == TaskState.TASK_STATE_COMPLETED, states

        async def resubscribe_unknown():
            async def drain():
                async for _ in streaming.subscribe(SubscribeToTaskRequest(id=str(uuid.uuid4()))):
                    pass

            await expect_error(drain, TaskNotFoundError)
            # The error came as the stream the client asked for (one `event: error`), as the SDK's server sends it.
            body = {'jsonrpc': '2.0', 'id': 1, 'method': 'SubscribeToTask', 'params': {'id': str(uuid.uuid4())}}
            raw = await http.post(
                f'{AGENT_URL}/rpc', json=body, headers={'a2a-version': '1.0', 'accept': 'text/event-stream'}
            )
            assert raw.headers['content-type'].startswith('text/event-stream'), raw.headers['content-type']
            assert raw.text.startswith('event: error\n'), raw.text

        async def refusals():
            # The A2A TCK's items a typed client can send: a negative historyLength, a message without its role.
            await expect_error(lambda: client.list_tasks(ListTasksRequest(history_length=-1)), InvalidParamsError)
            roleless = SendMessageRequest(message=message('echo:x', role=Role.ROLE_UNSPECIFIED))
            await expect_error(lambda: last_task(client, roleless), InvalidParamsError)

        async def discovery():
            card = await A2ACardResolver(http, BASE).get_agent_card()
            assert AGENT in [s.id for s in card.skills], [s.id for s in card.skills]
            assert [i.url for i in card.supported_interfaces] == [f'{BASE}/a2a/rpc'], card.supported_interfaces
            mesh = await client_of(BASE, http)
            task = await last_task(mesh, SendMessageRequest(message=message('echo:routed', skill=AGENT)))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status.state
            assert artifact_texts(task) == ['routed'], artifact_texts(task)
            assert (await mesh.get_task(GetTaskRequest(id=task.id))).id == task.id
            # A message naming no skill goes to the tenant's only agent (a kit that knows no skills, the A2A TCK).
            only = await last_task(mesh, SendMessageRequest(message=message('echo:the only agent')))
            assert artifact_texts(only) == ['the only agent'], artifact_texts(only)
            assert only.id in [t.id for t in (await mesh.list_tasks(ListTasksRequest(page_size=100))).tasks]

        for name, check in [
            ('send', send),
            ('get', get),
            ('list', list_tasks),
            ('cancel', cancel),
            ('streaming', stream),
            ('resubscribe-unknown-task', resubscribe_unknown),
            ('tck-refusals', refusals),
            ('discovery-and-skill-routing', discovery),
        ]:
            try:
                await check()
                results.append(True)
                print(f'PASS {name}', flush=True)
            except Exception as e:  # noqa: BLE001 - a check's failure, whatever it is, is reported and the next runs
                results.append(False)
                print(f'FAIL {name}: {type(e).__name__}: {e}', flush=True)
                traceback.print_exc(file=sys.stderr)
    return all(results)


if __name__ == '__main__':
    sys.exit(0 if asyncio.run(main()) else 1)
