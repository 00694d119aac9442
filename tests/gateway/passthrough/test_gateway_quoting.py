"""Errors quote what a client sent in a few words, and contents are labelled by who answered.

Defect 8 of the [trust II] issue: a `resources/read` of a megabyte URI answered a megabyte error,
and a server's contents named `byref://other/secret` reached the client as another server's. The
fixture `labels_server.py` plants gateway-namespace URIs in its contents and echoes each URI it
refuses, whole, as many servers do.
"""

from __future__ import annotations

import anyio
import pytest
from _gateway_rig import World, running
from mcp import Client
from mcp.shared.exceptions import MCPError

from _waits import scaled
from byref.gateway.edge.lanes.fastpath import ERROR_CHARS

pytestmark = pytest.mark.anyio
HUGE = "x" * 1_000_000


async def _refused(c: Client, uri: str) -> str:
    with pytest.raises(MCPError) as err:
        await c.read_resource(uri)
    return err.value.error.message


async def test_a_megabyte_uri_is_quoted_briefly_on_every_refusal_path(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"labels": world.fixture("labels_server.py", 20)}) as (
                _g, server), Client(server, mode="legacy") as c:
            nowhere = await _refused(c, "nowhere://" + HUGE)  # no server offers it
            assert nowhere == (
                f"Resource {'nowhere://' + HUGE[:90]!r}… (1,000,010 characters) is not offered "
                "by any server behind this gateway; resources/list names each as "
                "byref://<server>/<uri>.")
            artifact = await _refused(c, "byref:artifact/" + HUGE)  # not an artifact ref
            assert "(1,000,015 characters) names no artifact" in artifact
            assert len(artifact) < 400
            # The server's own refusal echoes the URI whole: the gateway's quote and the
            # server's words are both bounded.
            echoed = await _refused(c, "byref://labels/note://" + HUGE)
            assert echoed.startswith(
                f"Server 'labels' refused reading {'note://' + HUGE[:93]!r}… (1,000,007 "
                "characters): Resource not found: note://xxx")
            assert echoed.endswith("… [1,000,027 characters in all]")
            assert len(echoed) < 800
            with pytest.raises(MCPError) as err:
                await c.get_prompt("p" * 1_000_000)
            assert "(1,000,000 characters) is not offered" in err.value.error.message
            assert len(err.value.error.message) < 400
            with pytest.raises(MCPError) as err:
                await c.list_resources(cursor="c" * 1_000_000)
            assert err.value.error.message.startswith(f"Invalid cursor {'c' * 100!r}… ")
            assert len(err.value.error.message) < 400
            assert (await c.read_resource("note://a")).contents  # and it keeps serving


async def test_contents_are_labelled_under_the_server_that_answered(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"labels": world.fixture("labels_server.py", 20)}) as (
                _g, server), Client(server, mode="legacy") as c:
            for asked in ("note://a", "byref://labels/note://a"):
                labels = [str(x.uri) for x in (await c.read_resource(asked)).contents]
                planted = ["byref://labels/byref://other/secret",
                           "byref://labels/BYREF:artifact/art_0000000000000000000000"]
                own = "note://a" if asked == "note://a" else "byref://labels/note://a"
                assert labels == [*planted, own], asked


def test_the_backstop_bound_is_what_the_messages_are_cut_to() -> None:
    from byref.gateway.edge.lanes.fastpath import bounded_message

    assert bounded_message("y" * ERROR_CHARS) == "y" * ERROR_CHARS
    assert bounded_message("y" * 5_000) == "y" * ERROR_CHARS + "… [5,000 characters in all]"


async def test_any_error_a_handler_raises_leaves_the_edge_bounded() -> None:
    """The backstop for text no refusal shaped: an MCPError of any length, any subclass, is cut
    to ERROR_CHARS characters by the gateway's middleware, its code and data kept."""
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    from byref.gateway.edge.lanes.fastpath import PlainCalls

    class Custom(MCPError):
        pass

    async def never(*_: object) -> None:
        raise AssertionError("not a plain call")

    plain = PlainCalls(Server("t"), never, never, lambda _: None)  # type: ignore[arg-type]
    ctx: ServerRequestContext[object, object] = ServerRequestContext(
        session=None, lifespan_context=None, method="resources/read",  # type: ignore[arg-type]
        params={"uri": "x"}, request_id=1, meta=None, protocol_version="2025-06-18")

    async def raises(_: object) -> None:
        raise Custom(-32602, "z" * 3_000_000, {"kept": True})

    with pytest.raises(Custom) as err:
        await plain(ctx, raises)  # type: ignore[arg-type]
    assert err.value.error.code == -32602 and err.value.error.data == {"kept": True}
    assert err.value.error.message == "z" * ERROR_CHARS + "… [3,000,000 characters in all]"
