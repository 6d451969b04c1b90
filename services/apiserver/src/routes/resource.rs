//! The resource handler: decode the request into a request description
//! and options, run it with the resource type's handle (a watch: start it
//! at the type's actor), render the answer.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use super::render::{self, respond, Form};
use super::request::{decode, header, read_body, user_of};
use super::request_info::{RequestInfo, Verb};
use super::reviews::Review;
use super::AppState;
use crate::codec;
use crate::error::ApiError;
use crate::object::patch::PatchType;
use crate::object::selector::FieldSelector;
use crate::registry::catalog::Entry;
use crate::registry::flow::{Page, Part, Reply};
use crate::registry::options::{DeleteOptions, ListOptions, Query, WriteOptions};
use crate::registry::subresource::Serve;
use crate::registry::{actor, requests};

/// The scope and subresource rules that decide whether a path exists.
fn check_path(entry: &Entry, info: &RequestInfo) -> Result<Part, ApiError> {
    let def = entry.strategy.def();
    let part = match info.subresource.as_deref().and_then(|s| def.subresource(s)) {
        None if info.subresource.is_some() => return Err(ApiError::UnknownPath),
        None => Part::Main,
        Some(sub) => match sub.serve {
            Serve::Status => Part::Status,
            Serve::Scale => Part::Scale,
            Serve::Create(_) | Serve::Connect(_) => return Err(ApiError::UnknownPath),
        },
    };
    let collection = matches!(
        info.verb,
        Verb::List | Verb::Watch | Verb::DeleteCollection | Verb::Create
    );
    if (!def.namespaced && info.namespace.is_some())
        || (def.namespaced
            && info.namespace.is_none()
            && !matches!(info.verb, Verb::List | Verb::Watch))
    {
        return Err(ApiError::UnknownPath);
    }
    if part != Part::Main && collection {
        return Err(ApiError::UnknownPath);
    }
    if part != Part::Main && matches!(info.verb, Verb::Delete) {
        return Err(ApiError::MethodNotAllowed);
    }
    Ok(part)
}

/// The REST handler, the last step of the handler chain (`chain/`).
pub(crate) async fn dispatch(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: &RequestInfo,
    query: &Query,
) -> Result<HttpResponse, ApiError> {
    if let Some(review) = super::reviews::find(info) {
        return answer_review(req, payload, state, info, review).await;
    }
    let Some(entry) = state
        .catalog
        .find_any(&info.group, &info.version, &info.resource)
    else {
        // Not a served type: maybe an older collection of a subresource.
        return super::subresource::by_collection(req, payload, state, info, query).await;
    };
    let entry = &entry;
    if let Some(own) = super::subresource::own(entry, info) {
        return super::subresource::serve(req, payload, state, info, query, entry, own).await;
    }
    let part = check_path(entry, info)?;
    let form = match part {
        Part::Scale => Form::Json,
        _ => Form::negotiate(header(req, "accept"))?,
    };
    let call = Call {
        req,
        state,
        info,
        query,
        entry,
        part,
        form,
        feedback: Default::default(),
    };
    let answer = match info.verb {
        Verb::Get => get(&call).await,
        Verb::List => list(&call).await,
        Verb::Watch => watch(&call).await,
        Verb::Create => create(&call, payload).await,
        Verb::Update => update(&call, payload).await,
        Verb::Patch => patch(&call, payload).await,
        Verb::Delete => delete(&call, payload).await,
        Verb::DeleteCollection => delete_collection(&call).await,
    };
    answer.map_err(|error| error.with_warnings(call.feedback.warnings()))
}

/// A review (access, rules, identity, token): answered here, not stored.
async fn answer_review(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: &RequestInfo,
    review: &Review,
) -> Result<HttpResponse, ApiError> {
    let body = decode(req, read_body(payload).await?)?;
    let answer = match review.group {
        super::identity::GROUP => super::identity::answer(req, state, review, info, &body).await?,
        _ => {
            let authorizer = state.chain.authorizer.as_ref();
            super::reviews::answer(review, info, &body, &user_of(req), authorizer)?
        }
    };
    Ok(respond(201, Form::Json, answer, &[]))
}

/// One request to a resource type, resolved: what each verb works from.
struct Call<'a> {
    req: &'a HttpRequest,
    state: &'a AppState,
    info: &'a RequestInfo,
    query: &'a Query,
    entry: &'a Entry,
    part: Part,
    form: Form,
    /// The request's warnings, sent with a refusal too.
    feedback: std::sync::Arc<crate::admission::Feedback>,
}

impl Call<'_> {
    fn namespace(&self) -> String {
        self.info.namespace.clone().unwrap_or_default()
    }

    fn name(&self) -> String {
        self.info.name.clone().unwrap_or_default()
    }

    /// The list or watch options, narrowed to the one object the request
    /// names (`.../secrets/app?watch=1`), as kube does: the request was
    /// authorized for that name alone, so it serves no other. A field
    /// selector pinning another name contradicts the path.
    fn list_options(&self) -> Result<ListOptions, ApiError> {
        let mut options = ListOptions::parse(self.query)?;
        let Some(name) = self.info.name.as_deref() else {
            return Ok(options);
        };
        if options.fields.is_empty() {
            options.fields = FieldSelector(vec![("metadata.name".into(), true, name.into())]);
        } else if options.fields.exact_name() != Some(name) {
            return Err(ApiError::BadRequest(
                "fieldSelector metadata.name doesn't match requested name".into(),
            ));
        }
        Ok(options)
    }

    fn write_options(&self) -> Result<WriteOptions, ApiError> {
        let mut options = WriteOptions::parse(self.query)?;
        options.authorizer = Some(self.state.chain.authorizer.clone());
        options.feedback = self.feedback.clone();
        let options = options.with_user_agent(header(self.req, "user-agent"));
        Ok(options.with_user(user_of(self.req)))
    }

    fn written(&self, reply: Reply) -> HttpResponse {
        written(self.entry.strategy.as_ref(), self.form, reply)
    }

    fn listed(&self, page: Page) -> HttpResponse {
        match render::list(self.entry.strategy.as_ref(), self.form, page) {
            render::Body::List(list) => list.respond(),
            render::Body::Value(value) => respond(200, self.form, value, &[]),
        }
    }
}

async fn get(call: &Call<'_>) -> Result<HttpResponse, ApiError> {
    let resource_version = call.query.get("resourceVersion").filter(|v| !v.is_empty());
    let object = call
        .entry
        .call(requests::Get {
            namespace: call.namespace(),
            name: call.name(),
            part: call.part,
            resource_version: resource_version.cloned(),
        })
        .await?;
    let body = render::object(call.entry.strategy.as_ref(), call.form, object);
    Ok(respond(200, call.form, body, &[]))
}

async fn list(call: &Call<'_>) -> Result<HttpResponse, ApiError> {
    let options = call.list_options()?;
    let namespace = call.info.namespace.clone();
    let page = call
        .entry
        .call(requests::List { namespace, options })
        .await?;
    Ok(call.listed(page))
}

async fn watch(call: &Call<'_>) -> Result<HttpResponse, ApiError> {
    if call.form == Form::Yaml {
        return Err(ApiError::NotAcceptable(
            "application/json, application/json;as=Table;v=v1;g=meta.k8s.io".into(),
        ));
    }
    let options = call.list_options()?;
    let timeout = options.timeout;
    let namespace = call.info.namespace.clone();
    let slot = call
        .state
        .chain
        .watch_quota
        .acquire(&user_of(call.req).name)?;
    let receiver = call
        .entry
        .actor
        .send(actor::Watch { namespace, options })
        .await?;
    // As kube-apiserver: a watch that cannot start for a reason of its own
    // (a bad field selector, a cache that cannot catch up) is an HTTP
    // error; a too old revision is a 200 stream with one ERROR event.
    let receiver = match receiver {
        Err(err) if err.code() != 410 => return Err(err),
        other => other,
    };
    let (strategy, metrics) = (call.entry.strategy.clone(), call.state.metrics.clone());
    Ok(super::watch::respond(
        receiver, strategy, call.form, timeout, metrics, slot,
    ))
}

async fn create(call: &Call<'_>, payload: web::Payload) -> Result<HttpResponse, ApiError> {
    let body = decode(call.req, read_body(payload).await?)?;
    let reply = call
        .entry
        .call(requests::Create {
            namespace: call.namespace(),
            body,
            options: call.write_options()?,
        })
        .await?;
    Ok(call.written(reply))
}

async fn update(call: &Call<'_>, payload: web::Payload) -> Result<HttpResponse, ApiError> {
    let body = decode(call.req, read_body(payload).await?)?;
    let reply = call
        .entry
        .call(requests::Update {
            namespace: call.namespace(),
            name: call.name(),
            part: call.part,
            body,
            options: call.write_options()?,
        })
        .await?;
    Ok(call.written(reply))
}

async fn patch(call: &Call<'_>, payload: web::Payload) -> Result<HttpResponse, ApiError> {
    let content_type = header(call.req, "content-type").unwrap_or("");
    let strategic = call.entry.strategy.strategic_merge();
    let kind = PatchType::from_content_type(content_type, strategic)?;
    let bytes = read_body(payload).await?;
    // An apply patch is YAML (kubectl sends JSON, which is YAML too).
    let patch: Value = match kind {
        PatchType::Apply => codec::decode_yaml(&bytes)?,
        _ => serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))?,
    };
    let reply = call
        .entry
        .call(requests::Patch {
            namespace: call.namespace(),
            name: call.name(),
            part: call.part,
            kind,
            patch,
            options: call.write_options()?,
        })
        .await?;
    Ok(call.written(reply))
}

async fn delete(call: &Call<'_>, payload: web::Payload) -> Result<HttpResponse, ApiError> {
    let bytes = read_body(payload).await?;
    let body = match bytes.iter().all(u8::is_ascii_whitespace) {
        true => None,
        false => Some(decode(call.req, bytes)?),
    };
    let mut options = DeleteOptions::parse(call.query, body.as_ref())?.with_user(user_of(call.req));
    options.feedback = call.feedback.clone();
    let reply = call
        .entry
        .call(requests::Delete {
            namespace: call.namespace(),
            name: call.name(),
            options,
        })
        .await?;
    Ok(call.written(reply))
}

async fn delete_collection(call: &Call<'_>) -> Result<HttpResponse, ApiError> {
    let list = ListOptions::parse(call.query)?;
    let options = DeleteOptions::parse(call.query, None)?.with_user(user_of(call.req));
    let items = call
        .entry
        .call(requests::DeleteCollection {
            namespace: call.info.namespace.clone(),
            list,
            options,
        })
        .await?;
    let page = Page {
        items: items
            .into_iter()
            .map(|item| std::sync::Arc::new(crate::storage::Object::from_value(item)))
            .collect(),
        revision: 0,
        continue_token: None,
        remaining: None,
    };
    Ok(call.listed(page))
}

fn written(strategy: &dyn crate::registry::Strategy, form: Form, reply: Reply) -> HttpResponse {
    let mut response = respond(
        reply.code,
        form,
        render::object(strategy, form, reply.body),
        &reply.warnings,
    );
    if !reply.annotations.is_empty() {
        let annotations = crate::audit::Annotations(reply.annotations);
        response.extensions_mut().insert(annotations);
    }
    response
}
