//! The integration suite.

mod cache_on_fixture_pages;
