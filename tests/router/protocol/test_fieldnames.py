"""Proto field names (``task_id``) read as JSON names (``taskId``), only where A2A has them."""

from __future__ import annotations

from router.protocol.fieldnames import json_names


def test_v1_send_params_get_their_json_names() -> None:
    params = {
        "message": {
            "message_id": "m",
            "task_id": "t",
            "context_id": "c",
            "role": "ROLE_USER",
            "parts": [{"url": "https://x/a.png", "media_type": "image/png"}, {"text": "hi"}],
            "metadata": {"task_id": "kept: free JSON"},
        },
        "configuration": {"history_length": 2, "accepted_output_modes": ["text/plain"]},
        "metadata": {"context_id": "kept"},
    }
    out, clashes = json_names("1.0", "send", params)
    assert clashes == []
    message = out["message"]
    assert list(message) == ["messageId", "taskId", "contextId", "role", "parts", "metadata"]
    assert message["parts"][0] == {"url": "https://x/a.png", "mediaType": "image/png"}
    assert message["metadata"] == {"task_id": "kept: free JSON"}
    assert out["configuration"] == {"historyLength": 2, "acceptedOutputModes": ["text/plain"]}
    assert out["metadata"] == {"context_id": "kept"}
    assert params["message"]["task_id"] == "t"  # the caller's params are not changed


def test_params_with_json_names_only_are_returned_as_they_are() -> None:
    params = {"message": {"messageId": "m", "parts": [{"text": "hi"}]}, "configuration": {}}
    out, clashes = json_names("1.0", "stream", params)
    assert out is params and clashes == []


def test_a_field_under_both_names_is_a_clash() -> None:
    params = {"message": {"taskId": "a", "task_id": "b", "parts": []}}
    out, clashes = json_names("1.0", "send", params)
    assert clashes == [("message.task_id", "names the same field as 'taskId': send one")]
    assert out["message"] == {"taskId": "a", "parts": []}


def test_list_and_get_params_and_03_files() -> None:
    out, _ = json_names(
        "1.0", "list", {"context_id": "c", "page_size": 5, "include_artifacts": True}
    )
    assert out == {"contextId": "c", "pageSize": 5, "includeArtifacts": True}
    out, _ = json_names("0.3", "get", {"id": "t", "history_length": 1})
    assert out == {"id": "t", "historyLength": 1}
    part = {"kind": "file", "file": {"uri": "https://x/a.pdf", "mime_type": "application/pdf"}}
    out, _ = json_names("0.3", "send", {"message": {"message_id": "m", "parts": [part]}})
    assert out["message"]["parts"][0]["file"] == {
        "uri": "https://x/a.pdf",
        "mimeType": "application/pdf",
    }
    # 1.0 has no media_type in 0.3's shape, 0.3 no mediaType: each version's names only
    out, _ = json_names("0.3", "send", {"message": {"parts": [{"media_type": "x"}]}})
    assert out["message"]["parts"][0] == {"media_type": "x"}
