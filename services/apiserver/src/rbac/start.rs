//! What the `RBAC` authorization mode starts: the bootstrap policy
//! (reconciled), the informer and the aggregation controller, all ready
//! before the server answers its first request.

use std::sync::Arc;

use super::{aggregation, authorizer, informer, reconcile};
use crate::error::ApiError;
use crate::registry::Catalog;

/// The RBAC authorizer over `catalog`'s roles and bindings.
pub async fn authorizer(catalog: &Arc<Catalog>) -> Result<authorizer::Rbac, ApiError> {
    reconcile::bootstrap(catalog).await?;
    let mut shared = informer::start(catalog.clone()).await?;
    aggregation::settle(catalog, &mut shared).await?;
    actix_rt::spawn(aggregation::run(catalog.clone(), shared.clone()));
    Ok(authorizer::Rbac::new(shared))
}
