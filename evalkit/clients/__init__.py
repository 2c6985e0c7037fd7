"""Endpoint pools and the request/response shapes of each inference type."""
