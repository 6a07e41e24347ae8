"""The structured parts of a chat request: response formats, tools, tool calls and tool choices (OpenAI's shapes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class JsonSchemaSpec(BaseModel):
    """``response_format.json_schema``: the schema the reply must match (always enforced, ``strict`` or not)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaSpec | None = None


class FunctionSpec(BaseModel):
    """A function the model may call; ``parameters`` is its arguments' JSON Schema."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    function: FunctionSpec


class FunctionName(BaseModel):
    name: str


class FunctionCallSpec(BaseModel):
    """A call's function: its name and its arguments as JSON text."""

    name: str
    arguments: str = ""


class ToolCallSpec(BaseModel):
    """One call in an assistant turn of the history."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCallSpec


class NamedChoice(BaseModel):
    """``tool_choice`` naming one function."""

    type: Literal["function"]
    function: FunctionName
