"""Tools: a tool as the engine holds it, the ToolBroker every call goes through, the call's phases as pure rules, policies, and the approval desk."""
